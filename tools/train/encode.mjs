// Encodes training documents with the official Hugging Face tokenizers implementation
// (@huggingface/tokenizers from tools/node_modules), so the ids a model is trained on are the
// ids specd produces for the same text (tests/unit/tokenizer checks specd against this library).
//
//   node encode.mjs --tokenizer DIR --in docs.jsonl --out ids.bin
//
// docs.jsonl: one JSON string per line (one document). ids.bin: little-endian uint16, each
// document as BOS, its ids, EOS. Special-token text inside a document is encoded as ordinary
// text (the special added tokens are removed for encoding), so a literal "<|endoftext|>" in the
// standard library cannot end a document early.
import fs from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= process.argv.length) {
    console.error(`usage: node encode.mjs --tokenizer DIR --in FILE --out FILE (missing --${name})`);
    process.exit(2);
  }
  return process.argv[i + 1];
}

const dir = arg("tokenizer");
const readJson = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
const json = readJson("tokenizer.json");
const config = readJson("tokenizer_config.json");
const id = (content) => json.added_tokens.find((t) => t.content === content).id;
const bos = id(config.bos_token);
const eos = id(config.eos_token);
json.added_tokens = json.added_tokens.filter((t) => !t.special);
const tokenizer = new Tokenizer(json, config);

const lines = fs.readFileSync(arg("in"), "utf8").split("\n").filter((l) => l.length > 0);
const chunks = [];
let total = 0;
for (const [n, line] of lines.entries()) {
  const text = JSON.parse(line);
  if (typeof text !== "string") throw new Error(`line ${n + 1} of the input is not a JSON string`);
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  const out = new Uint16Array(ids.length + 2);
  out[0] = bos;
  out.set(ids, 1);
  out[ids.length + 1] = eos;
  chunks.push(out);
  total += out.length;
}
const all = new Uint16Array(total);
let at = 0;
for (const c of chunks) {
  all.set(c, at);
  at += c.length;
}
fs.writeFileSync(arg("out"), Buffer.from(all.buffer));
