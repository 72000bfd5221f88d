// Oracle for specd's tokenizer tests: runs the official Hugging Face tokenizers implementation
// (@huggingface/tokenizers) over a corpus and writes the expected ids and decodes as JSON.
//
//   node oracle.mjs --tokenizer DIR_OR_TOKENIZER_JSON --corpus corpus.jsonl --out expected.json
//
// corpus.jsonl: one JSON string per line. Output:
//   {"tokenizer": ..., "cases": [{"text": s,
//     "ids": encode(s)                                  (add_special_tokens, special text parsed),
//     "ids_plain": encode(s, add_special_tokens=false)  (special text parsed),
//     "ids_noparse": encode(s) with special-token text tokenized as ordinary text,
//     "ids_noparse_plain": the same without add_special_tokens,
//     "decode": decode(ids), "decode_skip": decode(ids, skip_special_tokens=true),
//     "decode_noparse": decode(ids_noparse)}]}
// "Not parsing special text" is the official tokenizer with its special added tokens removed
// (what the Rust implementation's encode_special_tokens does); non-special added tokens stay.
import fs from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= process.argv.length) {
    console.error(`usage: node oracle.mjs --tokenizer PATH --corpus FILE --out FILE (missing --${name})`);
    process.exit(2);
  }
  return process.argv[i + 1];
}

const tokenizerArg = arg("tokenizer");
const tokenizerFile = fs.statSync(tokenizerArg).isDirectory() ? path.join(tokenizerArg, "tokenizer.json") : tokenizerArg;
const configFile = path.join(path.dirname(tokenizerFile), "tokenizer_config.json");
const readJson = (f) => JSON.parse(fs.readFileSync(f, "utf8"));
const loadConfig = () => (fs.existsSync(configFile) ? readJson(configFile) : {});

const full = new Tokenizer(readJson(tokenizerFile), loadConfig());
const strippedJson = readJson(tokenizerFile);
strippedJson.added_tokens = (strippedJson.added_tokens ?? []).filter((t) => !t.special);
const noParse = new Tokenizer(strippedJson, loadConfig());

const decode = (tok, ids, skip) => (ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: skip }));

const lines = fs.readFileSync(arg("corpus"), "utf8").split("\n").filter((l) => l.length > 0);
const cases = lines.map((line, n) => {
  const text = JSON.parse(line);
  if (typeof text !== "string") throw new Error(`corpus line ${n + 1} is not a JSON string`);
  const ids = full.encode(text).ids;
  const idsNoParse = noParse.encode(text).ids;
  return {
    text,
    ids,
    ids_plain: full.encode(text, { add_special_tokens: false }).ids,
    ids_noparse: idsNoParse,
    ids_noparse_plain: noParse.encode(text, { add_special_tokens: false }).ids,
    decode: decode(full, ids, false),
    decode_skip: decode(full, ids, true),
    decode_noparse: decode(full, idsNoParse, false),
  };
});
fs.writeFileSync(arg("out"), JSON.stringify({ tokenizer: tokenizerFile, cases }));
