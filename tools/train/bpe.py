"""A byte-level BPE tokenizer trainer that writes a Hugging Face tokenizer.json.

The tokenizer is the GPT-2 / Llama 3 design: text is split by the Llama 3 pre-tokenizer regex
(words with one leading non-letter, digits in runs of at most 3, punctuation runs, newlines,
indentation runs), each piece is mapped to bytes, and BPE merges bytes. Every byte is a base
token, so any input encodes without an unknown token (byte-level BPE needs no separate byte
fallback). Ids: byte b is id b, merges follow in the order they were learned, and the two
special tokens take the last two ids.

Training counts the pre-tokenized pieces of the corpus once, then repeats: merge the most
frequent adjacent pair (ties broken by the smaller pair of ids, so the result depends only on
the corpus), updating the pair counts of the pieces that contain it. The pre-tokenizer regex
here is Python's `re` translation of the Oniguruma pattern written into tokenizer.json; it
differs only on rare non-ASCII number characters, which only shifts counts slightly. Encoding
for training uses the official implementation (encode.mjs), never this approximation.
"""

import collections
import heapq
import json
import os
import re

# The pattern written into tokenizer.json (Oniguruma syntax, as Llama 3 ships it).
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Python translation: \p{L} = [^\W\d_], \p{N} ~ \d, "not newline/letter/number" = [^\r\n\w] or _.
_PY_PATTERN = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?:[^\r\n\w]|_)?[^\W\d_]+|\d{1,3}| ?(?:[^\s\w]|_)+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)

BOS = "<|startoftext|>"
EOS = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable characters (what ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def count_pieces(texts):
    counts = collections.Counter()
    for t in texts:
        counts.update(_PY_PATTERN.findall(t))
    return counts


class _Trainer:
    """Pair counts over the distinct pieces, with a lazy max-heap of pairs."""

    def __init__(self, piece_counts):
        self.words = [list(p.encode("utf-8")) for p in piece_counts]
        self.freqs = list(piece_counts.values())
        self.pairs = collections.Counter()
        self.where = collections.defaultdict(set)
        for i, w in enumerate(self.words):
            for a, b in zip(w, w[1:]):
                self.pairs[(a, b)] += self.freqs[i]
                self.where[(a, b)].add(i)
        self.heap = [(-c, p) for p, c in self.pairs.items()]
        heapq.heapify(self.heap)

    def best_pair(self):
        while self.heap:
            neg, pair = heapq.heappop(self.heap)
            current = self.pairs.get(pair, 0)
            if current <= 0:
                continue
            if -neg != current:  # stale entry: push the current count back
                heapq.heappush(self.heap, (-current, pair))
                continue
            return pair
        return None

    def merge(self, pair, new_id):
        a, b = pair
        changed = set()
        for i in list(self.where[pair]):
            w, f = self.words[i], self.freqs[i]
            for x, y in zip(w, w[1:]):
                self.pairs[(x, y)] -= f
                changed.add((x, y))
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(new_id)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            self.words[i] = out
            for x, y in zip(out, out[1:]):
                self.pairs[(x, y)] += f
                self.where[(x, y)].add(i)
                changed.add((x, y))
        del self.where[pair]
        for p in changed:
            c = self.pairs[p]
            if c > 0:
                heapq.heappush(self.heap, (-c, p))
            else:
                del self.pairs[p]


def train(texts, vocab_size, progress=print):
    """Learns merges until the vocabulary (256 bytes + merges + 2 specials) has vocab_size tokens.
    Returns (tokens, merges): tokens[id] = bytes for every non-special id, merges = [(a, b)] ids."""
    if vocab_size < 258 + 1:
        raise ValueError(f"vocab_size {vocab_size} leaves no room for merges")
    piece_counts = count_pieces(texts)
    progress(f"bpe: {sum(piece_counts.values())} pieces, {len(piece_counts)} distinct")
    trainer = _Trainer(piece_counts)
    tokens = [bytes([b]) for b in range(256)]
    index = {t: i for i, t in enumerate(tokens)}
    merges = []
    target = vocab_size - 2
    while len(tokens) < target:
        pair = trainer.best_pair()
        if pair is None:
            raise ValueError(f"corpus too small: ran out of pairs at {len(tokens)} tokens")
        merged = tokens[pair[0]] + tokens[pair[1]]
        new_id = index.get(merged)
        if new_id is None:  # the same bytes may already have been built by another merge path
            new_id = len(tokens)
            tokens.append(merged)
            index[merged] = new_id
        merges.append(pair)
        trainer.merge(pair, new_id)
        if len(merges) % 500 == 0:
            progress(f"bpe: {len(merges)} merges, {len(tokens)} tokens")
    return tokens, merges


def tokenizer_json(tokens, merges):
    """The tokenizer.json object (HF `tokenizers` format) for the trained vocabulary."""
    b2u = bytes_to_unicode()
    text = ["".join(b2u[b] for b in t) for t in tokens]
    bos_id, eos_id = len(tokens), len(tokens) + 1
    # The special tokens are in the model's vocabulary too (as in Llama 2's tokenizer.json), so a
    # tokenizer without its added tokens still maps them to ids; no merge ever produces them.
    vocab = {s: i for i, s in enumerate(text + [BOS, EOS])}

    def special(i, content):
        return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True}

    bos = {"SpecialToken": {"id": BOS, "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(bos_id, BOS), special(eos_id, EOS)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": BOS, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {BOS: {"id": BOS, "ids": [bos_id], "tokens": [BOS]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{text[a]} {text[b]}" for a, b in merges]},
    }


def tokenizer_config_json(vocab_size, max_length):
    bos_id, eos_id = vocab_size - 2, vocab_size - 1
    decoder = {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": True} for i, c in ((bos_id, BOS), (eos_id, EOS))}
    # No chat template: the models are trained on plain code and documentation, so they are
    # used for completions. clean_up_tokenization_spaces would rewrite " ." in code; off.
    return {"added_tokens_decoder": decoder, "bos_token": BOS, "eos_token": EOS, "add_bos_token": True,
            "add_eos_token": False, "clean_up_tokenization_spaces": False, "model_max_length": max_length,
            "tokenizer_class": "PreTrainedTokenizerFast"}


def write(directory, tokens, merges, max_length):
    vocab_size = len(tokens) + 2
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(tokens, merges), f, ensure_ascii=False, indent=None, separators=(",", ":"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config_json(vocab_size, max_length), f, indent=2)
        f.write("\n")
