#!/usr/bin/python3
"""Writes the hostile inputs of scripts/hostile-campaign.sh (issue 41's classes) into a directory.

    hostile_inputs.py CLASS OUT_DIR {quick|full} [ARG]

CLASS is one of templates, gguf, ablog, plugins (ARG: a real plugin .so to mutate) or http.
Every class writes OUT_DIR/manifest.tsv, one input per line, tab-separated; the campaign script
reads it. Everything is generated here from fixed seeds (Debian's python3 and numpy only).
"""
import json
import os
import random
import socket
import struct
import sys

import numpy as np

from hostile_common import manifest, pick
from hostile_plugin_inputs import plugins



# ---------------------------------------------------------------------------------------------
# 1. Chat templates. Row: name, template file, how it is supplied (tokenizer_config | option),
#    requests file (one JSON body per line: chat_template_kwargs vary).
# ---------------------------------------------------------------------------------------------
def templates(out, quick):
    hay = "('a' * 20000000)"  # 20 MB, within the 64 Mi budget
    pat = "(('a' * 20000) ~ 'b')"  # never found: a naive search compares ~20000 bytes per position
    t = {
        # work and memory of one step (the list)
        "string_doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s|length }}",
        "center_1e10": "{{ 'a'|center(10**10) }}",
        "indent_1e9": "{{ 'a\nb'|indent(10**9) }}",
        "list_times_64M": "{{ ([0] * 67108864)|length }}",
        "join_100_x_64MiB": "{{ ((['z' * 67108864] * 100)|join(''))|length }}",
        "join_method_huge": "{{ ''.join(['z' * 1000000] * 1000)|length }}",
        "sort_in_loop": "{% for i in range(100000) %}{{ (range(100000)|list|sort(reverse=true))|length }}{% endfor %}",
        "replace_in_loop": "{% set ns = namespace(s='a' * 1000000) %}{% for i in range(100000) %}"
        "{% set ns.s = ns.s.replace('a', 'b').replace('b', 'a') %}{% endfor %}",
        "tojson_indent_1e10": "{{ messages|tojson(indent=10**10) }}",
        "strftime_huge_format": "{{ strftime_now('%Y' * 10000000) }}",
        "title_wordcount_40MB": "{% set s = 'ab ' * 20000000 %}{{ s|title|wordcount }}",
        "unique_100k": "{{ range(100000)|list|unique|list|length }}",
        # ranges and integers (UB before the fix)
        "range_2p63": "{% for i in range(2**63-1) %}{% endfor %}x",
        "range_2p63_list": "{{ range(2**63-1)|list|length }}",
        "range_float_1e300": "{{ range(1e300)|length }}",
        "range_neg_2p63": "{{ range(-9223372036854775807 - 1, 9223372036854775807)|length }}",
        "int_overflow": "{{ 9223372036854775807 + 1 }}",
        "int_min_div_neg1": "{{ (-9223372036854775807 - 1) // -1 }}{{ (-9223372036854775807 - 1) % -1 }}",
        "pow_overflow": "{{ 2**64 }}{{ 10**10**10 }}",
        "float_to_int": "{{ 1e300|int }}{{ (1e308 * 10)|int }}{{ 'nan'|float|int }}{{ -1e19|int }}",
        "round_precision": "{{ 1.5|round(1000000000) }}{{ 1e308|round(-400) }}",
        "div_by_zero": "{{ 1 // 0 }}",
        "mod_by_zero": "{{ 1 % 0 }}",
        "repeat_neg_and_huge": "{{ 'x' * -9223372036854775807 }}{{ 'x' * 9223372036854775807 }}",
        "format_width_1e9": "{{ '%1000000000s'|format('a') }}{{ '%.1000000000f'|format(1.5) }}",
        "format_method_width": "{{ '{:>1000000000}'.format('a') }}",
        # depth and recursion
        "macro_recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "macro_fanout_2p60": "{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}"
        "{{ f(0) }}",
        "caller_recursion": "{% macro f() %}{{ caller() }}{% endmacro %}" + "{% call f() %}" * 5000
        + "x" + "{% endcall %}" * 5000,
        "nested_if_20000": "{% if true %}" * 20000 + "x" + "{% endif %}" * 20000,
        "nested_for_5000": "{% for a in [1] %}" * 5000 + "x" + "{% endfor %}" * 5000,
        "parens_100000": "{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}",
        "list_literal_100000": "{{ " + "[" * 100000 + "]" * 100000 + " }}",
        "dict_literal_50000": "{{ " + "{'a': " * 50000 + "1" + "}" * 50000 + " }}",
        "filter_chain_200000": "{{ 'a'" + "|upper" * 200000 + " }}",
        "not_chain_200000": "{{ " + "not " * 200000 + "1 }}",
        "unclosed_blocks": "{% for x in messages %}" * 1000,
        "namespace_cycle": "{% set ns = namespace() %}{% set ns.x = ns %}{{ ns }}{{ ns|tojson }}",
        # a list element costs far more memory than the one unit the budget charges
        "list_times_30M": "{{ ([0] * 30000000)|length }}",
        "split_8M_words": "{{ ('a ' * 8000000).split()|length }}",
        "batch_1_of_10M": "{{ (([0] * 10000000)|batch(1)|list)|length }}",
        "map_string_10M": "{{ (([0] * 10000000)|map('string')|list)|length }}",
        "string_to_list_30M": "{{ ('x' * 30000000)|list|length }}",
        "tojson_list_20M": "{{ (([0] * 20000000)|tojson)|length }}",
        # one builtin step that does unbounded CPU work (naive substring search)
        "find_naive": "{{ %s.find(%s) }}" % (hay, pat),
        "count_naive": "{{ %s.count(%s) }}" % (hay, pat),
        "in_naive": "{{ %s in %s }}" % (pat, hay),
        "replace_nomatch": "{{ %s.replace(%s, 'x')|length }}" % (hay, pat),
        "split_long_sep": "{{ %s.split(%s)|length }}" % (hay, pat),
        # many cheap steps: stopped by server.template_timeout_ms
        # (each find is charged 120 KB and takes ~25 ms: ~14 s within the budget)
        "slow_find_loop": "{% set s = 'a' * 80000 %}{% set p = ('a' * 40000) ~ 'b' %}{% for i in range(5000) %}"
        "{% if s.find(p) >= 0 %}x{% endif %}{% endfor %}",
        # output and error size
        "output_over_16MiB": "{% for i in range(1000) %}{% for j in range(1100) %}{{ 'xxxxxxxxxxxxxxxx' }}"
        "{% endfor %}{% endfor %}",
        "output_15MB_one_word": "{% for i in range(1000) %}{{ 'y' * 15000 }}{% endfor %}",
        "literal_8MB": "{{ '" + "q" * 8000000 + "'|length }}",
        "raise_10MB_message": "{{ raise_exception('E' * 10000000) }}",
        # driven by the request's chat_template_kwargs
        "kwargs_amplifier": "{{ 'x' * (n|default(1)) }}{{ 'y'|center(w|default(1)) }}"
        "{% for i in range(r|default(1)) %}{{ s|default('') }}{% endfor %}",
    }
    rows = []
    plain = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    for name, src in t.items():
        path = os.path.join(out, name + ".jinja")
        with open(path, "w") as f:
            f.write(src)
        reqs = [plain]
        if name == "kwargs_amplifier":
            reqs = [dict(plain, chat_template_kwargs=k) for k in (
                {"n": 10**18}, {"n": -(2**63)}, {"w": 10**12}, {"n": 60000000},
                {"r": 100000, "s": "z" * 1000}, {"n": 1e300}, {"s": "q" * 500000, "r": 100})]
        with open(path + ".requests", "w") as f:
            for r in reqs:
                f.write(json.dumps(r) + "\n")
        supplied = "option" if name in ("literal_8MB", "slow_find_loop") else "tokenizer_config"
        rows.append((name, path, supplied, path + ".requests"))
    # transformers' list form: the tool_use template is hostile and picked by requests with tools
    named = [{"name": "default", "template": "{{ messages[0]['content'] }}"},
             {"name": "tool_use", "template": t["list_times_64M"]}]
    path = os.path.join(out, "named_tool_use.json")
    with open(path, "w") as f:
        json.dump(named, f)
    with open(path + ".requests", "w") as f:
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
        f.write(json.dumps(dict(plain, tools=tools)) + "\n")
    rows.append(("named_tool_use", path, "tokenizer_config_list", path + ".requests"))
    manifest(out, pick(rows, quick, {"center_1e10", "find_naive"}))
    # SIGTERM during a render: name, template, server.template_timeout_ms
    sig = [("slow_find_loop_no_deadline", t["slow_find_loop"], 0),
           ("slow_find_loop_default", t["slow_find_loop"], 1000),
           ("list_times_30M", t["list_times_30M"], 1000),
           ("find_naive", t["find_naive"], 1000)]
    if quick:
        sig = sig[:1]
    with open(os.path.join(out, "sigterm.tsv"), "w") as f:
        for name, src, ms in sig:
            path = os.path.join(out, "sigterm_" + name + ".jinja")
            with open(path, "w") as g:
                g.write(src)
            f.write("%s\t%s\t%d\n" % (name, path, ms))


# ---------------------------------------------------------------------------------------------
# 2. GGUF vocabularies: a 1-layer Llama (hidden 16, tied embeddings) around each vocabulary.
#    Row: name, file.
# ---------------------------------------------------------------------------------------------
GGUF_U8, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR, GGUF_U64 = 0, 4, 5, 6, 7, 8, 9, 10


class Meta:
    def __init__(self):
        self.parts = []
        self.count = 0

    def key(self, k, t):
        k = k.encode()
        self.parts.append(struct.pack("<Q", len(k)) + k + struct.pack("<I", t))
        self.count += 1

    def str(self, k, v):
        self.key(k, GGUF_STR)
        v = v if isinstance(v, bytes) else v.encode()
        self.parts.append(struct.pack("<Q", len(v)) + v)

    def u32(self, k, v):
        self.key(k, GGUF_U32)
        self.parts.append(struct.pack("<I", v))

    def u64(self, k, v):
        self.key(k, GGUF_U64)
        self.parts.append(struct.pack("<Q", v))

    def f32(self, k, v):
        self.key(k, GGUF_F32)
        self.parts.append(struct.pack("<f", v))

    def bool(self, k, v):
        self.key(k, GGUF_BOOL)
        self.parts.append(struct.pack("<?", v))

    def strs(self, k, items):
        self.key(k, GGUF_ARR)
        self.parts.append(struct.pack("<IQ", GGUF_STR, len(items)))
        enc = [s if isinstance(s, bytes) else s.encode("utf-8", "surrogatepass") for s in items]
        self.parts.append(b"".join(struct.pack("<Q", len(s)) + s for s in enc))

    def arr(self, k, etype, values, fmt):
        self.key(k, GGUF_ARR)
        self.parts.append(struct.pack("<IQ", etype, len(values)))
        self.parts.append(np.asarray(values, dtype=fmt).tobytes())


def llama_base():
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
    types = [2, 3, 3] + [6] * 256
    normal = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["\u2581h", "he", "ll", "lo"]
    return toks + normal, types + [1] * len(normal)


def write_gguf(path, tokens, types=None, scores=None, model="llama", extra=None, merges=None, rows=None,
               token_key="tokenizer.ggml.tokens"):
    hidden, ffn = 16, 32
    m = Meta()
    m.str("general.architecture", "llama")
    m.u32("llama.context_length", 4096)
    m.u32("llama.embedding_length", hidden)
    m.u32("llama.block_count", 1)
    m.u32("llama.feed_forward_length", ffn)
    m.u32("llama.attention.head_count", 2)
    m.u32("llama.attention.head_count_kv", 2)
    m.f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    m.f32("llama.rope.freq_base", 10000.0)
    m.str("tokenizer.ggml.model", model)
    if tokens is not None:
        m.strs(token_key, tokens)
    n = len(tokens) if tokens is not None else 0
    if types is None:
        types = [1] * n
    if scores is None:
        scores = [-float(i) for i in range(len(types))]
    if types is not False:
        m.arr("tokenizer.ggml.token_type", GGUF_I32, types, "<i4")
    if scores is not False:
        m.arr("tokenizer.ggml.scores", GGUF_F32, scores, "<f4")
    if merges is not None:
        m.strs("tokenizer.ggml.merges", merges)
    extra = extra or {}
    for k, v in (("bos_token_id", 1), ("eos_token_id", 2), ("unknown_token_id", 0)):
        if "tokenizer.ggml." + k not in extra:
            m.u32("tokenizer.ggml." + k, v)
    for k, (kind, v) in extra.items():
        getattr(m, kind)(k, v)
    rows = rows if rows is not None else max(n, 1)
    rng = np.random.default_rng(1)
    tensors = [("token_embd.weight", [hidden, rows], 1, (rng.standard_normal(hidden * rows) * 0.5).astype("<f2"))]

    def f32(name, shape, ones=False):
        size = int(np.prod(shape))
        data = np.ones(size, "<f4") if ones else (rng.standard_normal(size) * 0.02).astype("<f4")
        tensors.append((name, shape, 0, data))

    f32("blk.0.attn_norm.weight", [hidden], True)
    for p in ("attn_q", "attn_k", "attn_v", "attn_output"):
        f32("blk.0.%s.weight" % p, [hidden, hidden])
    f32("blk.0.ffn_norm.weight", [hidden], True)
    f32("blk.0.ffn_gate.weight", [hidden, ffn])
    f32("blk.0.ffn_up.weight", [hidden, ffn])
    f32("blk.0.ffn_down.weight", [ffn, hidden])
    f32("output_norm.weight", [hidden], True)
    infos, blobs, off = [], [], 0
    for name, shape, ttype, data in tensors:
        nb = name.encode()
        infos.append(struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(shape))
                     + b"".join(struct.pack("<Q", d) for d in shape) + struct.pack("<IQ", ttype, off))
        raw = data.tobytes()
        pad = (-len(raw)) % 32
        blobs.append(raw + b"\0" * pad)
        off += len(raw) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), m.count) + b"".join(m.parts) + b"".join(infos)
    head += b"\0" * ((-len(head)) % 32)
    with open(path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)


def gguf(out, quick):
    rows = []
    base, btypes = llama_base()

    keep = {"benign_baseline", "one_2MB_token", "z_chain_to_2000"}  # quick: the two worst inputs

    def add(name, tokens, types=None, **kw):
        if quick and name not in keep:
            return
        path = os.path.join(out, name + ".gguf")
        if callable(tokens):
            tokens = tokens()
        if types is None and tokens is not None and kw.get("model", "llama") == "llama":
            types = btypes + [1] * (len(tokens) - len(base))
        write_gguf(path, tokens, types, **kw)
        rows.append((name, path))

    rnd = random.Random(41)
    add("benign_baseline", base)  # the idle reference: not counted as an input
    add("one_2MB_token", base + ["z" * (2 << 20)])
    add("token_1024_bytes", base + ["z" * 1024])
    add("token_1025_bytes", base + ["z" * 1025])
    add("z_chain_to_1024", base + ["z" * k for k in range(2, 1025)])
    add("z_chain_to_2000", base + ["z" * k for k in range(2, 2001)])
    chains = [c * k for c in "bcdefgijkmnopqrstuvwxyz" for k in range(2, 1025)]
    add("23_chains_to_1024", base + chains)
    add("4000_random_1024_byte_tokens",
        lambda: base + ["".join(rnd.choice("ab") for _ in range(1024)) for _ in range(4000)])
    add("1M_tokens", lambda: base + ["%x" % i for i in range(1000000)])  # 4x the largest real vocabularies
    add("100k_duplicates", base + ["a"] * 100000)
    add("10k_empty_tokens", base + [""] * 10000)
    bad_utf8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc3", b"\xe2\x82", b"a\x00b",
                b"\xfe\xfe\xff\xff", b"\x80" * 500]
    add("invalid_utf8_tokens", base + bad_utf8 * 100)
    add("invalid_utf8_control_tokens", base + bad_utf8, types=btypes + [3] * len(bad_utf8))
    add("bad_byte_tokens", base + ["<0xZZ>", "<0x100>", "<0x>", "<0x0000000041>"], types=btypes + [6] * 4)
    add("10k_long_control_tokens", base + ["z" * 1000 + "%05d" % i for i in range(10000)],
        types=btypes + [3] * 10000)
    add("nested_control_prefixes", base + ["<" + "z" * k for k in range(1, 1020)], types=btypes + [3] * 1019)
    add("nan_inf_scores", base + ["ab", "bc"], scores=[float("nan")] * (len(base) + 1) + [float("inf")])
    add("token_types_out_of_range", base + ["ab"], types=btypes + [99])
    add("negative_token_types", base + ["ab"], types=btypes + [-2**31])
    add("types_length_mismatch", base + ["ab"], types=btypes)
    add("scores_length_mismatch", base + ["ab"], scores=[0.0] * 3)
    add("bos_eos_out_of_range", base, extra={"tokenizer.ggml.bos_token_id": ("u32", 2**32 - 1),
                                             "tokenizer.ggml.eos_token_id": ("u32", 2**31)})
    add("rows_mismatch", base, rows=len(base) + 7)
    add("no_tokens", None, types=False, scores=False, rows=16)
    add("unknown_tokenizer_model", base, model="z" * 100000)
    bpe = ["<unk>", "<s>", "</s>"] + [chr(c) for c in range(33, 127)] + ["\u0120", "\u010a", "ab"]
    bpe_types = [2, 3, 3] + [1] * (len(bpe) - 3)
    add("gpt2_1M_merges", bpe, model="gpt2", types=bpe_types, merges=["a b"] * 1000000)
    add("gpt2_unknown_merges", bpe, model="gpt2", types=bpe_types,
        merges=["q%d r%d" % (i, i) for i in range(100000)] + ["nospace", "", " ", "a  b", "a b c"])
    add("gpt2_long_merges", bpe + ["z" * k for k in range(2, 1025)], model="gpt2",
        types=bpe_types + [1] * 1023, merges=["%s z" % ("z" * k) for k in range(1, 1024)])
    add("gpt2_invalid_utf8", bpe + [b.decode("latin-1") for b in bad_utf8] + bad_utf8, model="gpt2",
        types=bpe_types + [1] * (2 * len(bad_utf8)), merges=["a b"])
    add("gpt2_pre_1MB_name", bpe, model="gpt2", types=bpe_types, merges=["a b"],
        extra={"tokenizer.ggml.pre": ("str", "p" * 1000000)})
    add("chat_template_8MB", base, extra={"tokenizer.chat_template": ("str", "{{ 'x' }}" * 900000)})
    add("tokens_as_u8_array", base, token_key="tokenizer.ggml.bogus_tokens")
    manifest(out, rows)


# ---------------------------------------------------------------------------------------------
# 3. A/B logs. Row: name, path (a file here, or a device / FIFO / directory), setup kind.
# ---------------------------------------------------------------------------------------------
def record(rid, arm, steps=3, shadow=None):
    r = {"v": 1, "id": rid, "arm": arm, "verifier": "rejection", "lossless": True, "assigned": "random",
         "finish": "length", "temperature": 0.0, "k": 3, "prompt_tokens": 4, "generated_tokens": 8,
         "decode_steps": 7, "ttft_s": 0.0012, "tpot_s": 0.0005, "latency_s": 0.0047, "step_s": 0.0015,
         "drafted": [3] * steps, "accepted": [1] * steps, "drafted_at": [steps] * 3, "accepted_at": [steps, 0, 0],
         "logprob_sum": -2.0, "logprob_tokens": 2, "shadow": {}}
    for s in shadow or []:
        r["shadow"][s] = {"verifier": "typical_acceptance", "lossless": False, "k": 3, "drafted": [3] * steps,
                          "accepted": [2] * steps, "compared": 2, "differing": 0, "logprob_sum": -1.5,
                          "logprob_tokens": 2, "verify_s": 0.0002}
    return json.dumps(r)


def ablog(out, quick):
    rows = []
    rnd = random.Random(7)
    keep = {"valid_3_records", "dev_zero", "deep_brackets_30MB"}

    def add(name, content=None, kind="file", path=None):
        if quick and name not in keep:
            return
        p = path or os.path.join(out, name + ".jsonl")
        if content is not None:
            with open(p, "wb") as f:
                if callable(content):
                    content(f)
                else:
                    f.write(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
        rows.append((name, p, kind))

    good = record(1, "rejection", shadow=["typical"])

    def big_line(n, prefix=b"", suffix=b""):
        def w(f):
            f.write(prefix)
            chunk = b"a" * (1 << 20)
            for _ in range(n >> 20):
                f.write(chunk)
            f.write(suffix + b"\n")
        return w

    add("valid_3_records", "\n".join([good, record(2, "typical"), record(3, "rejection")]) + "\n")
    add("line_100MB_bare", big_line(100 << 20))
    add("line_100MB_json_string", big_line(100 << 20, b'{"v":1,"arm":"', b'"}'))
    add("line_just_under_64MiB", big_line((64 << 20) - 4096, b'{"v":1,"arm":"', b'"}'))
    add("dev_zero", path="/dev/zero", kind="device")
    add("dev_urandom", path="/dev/urandom", kind="device")
    add("fifo_no_writer", kind="fifo", path=os.path.join(out, "fifo_no_writer.jsonl"))
    add("fifo_endless_writer", kind="fifo_writer", path=os.path.join(out, "fifo_endless_writer.jsonl"))
    add("directory", kind="dir", path=os.path.join(out, "dir.jsonl"))
    add("symlink_to_dev_zero", kind="symlink_zero", path=os.path.join(out, "zero_link.jsonl"))
    add("symlink_loop", kind="symlink_loop", path=os.path.join(out, "loop.jsonl"))
    add("proc_self_pagemap", path="/proc/self/pagemap", kind="device")
    add("deep_brackets_30MB", "[" * (30 << 20) + "\n")
    add("deep_objects_1M", '{"a":' * 1000000 + "1" + "}" * 1000000 + "\n")
    add("deep_in_record", good[:-1] + ', "x": ' + "[" * 100000 + "]" * 100000 + "}\n")
    add("arms_1000", "".join(record(i, "arm%04d" % i) + "\n" for i in range(1000)))
    add("arms_5000_x2", "".join(record(i, "arm%05d" % (i // 2)) + "\n" for i in range(10000)))
    add("shadows_200_arms_each", "".join(
        record(i, "a%03d" % i, shadow=["a%03d" % j for j in range(200) if j != i]) + "\n" for i in range(200)))
    add("records_10k", "".join(record(i, ("rejection", "typical")[i % 2], shadow=["x"]) + "\n" for i in range(10000)))
    add("record_5M_steps", record(1, "rejection", steps=5000000) + "\n")
    add("binary_junk_10MB", bytes(rnd.getrandbits(8) for _ in range(1 << 20)) * 10)
    add("newlines_10M", "\n" * 10000000)
    add("truncated_lines", "".join(good[:k] + "\n" for k in range(1, len(good), 7)))
    add("truncated_last_line", good + "\n" + good[: len(good) // 2])
    add("arm_name_60MB", big_line(60 << 20, b'{"v":1,"id":1,"finish":"length","arm":"', b'"}'))
    add("shadow_name_1MB", good.replace('"typical"', '"' + "s" * 1000000 + '"', 1) + "\n")
    add("hostile_values", "\n".join([
        good.replace('"k": 3', '"k": 1e400'), good.replace('"id": 1', '"id": -1'),
        good.replace('"accepted": [1, 1, 1]', '"accepted": [9, -9, 1e308]'),
        good.replace('"drafted": [3, 3, 3]', '"drafted": [3]'),
        good.replace('"tpot_s": 0.0005', '"tpot_s": -1e308'),
        good.replace('"v": 1', '"v": 1, "v": 2'),
        good.replace('"arm": "rejection"', '"arm": "\\ud800"'),
        good.replace('"arm": "rejection"', '"arm": ""'),
        '{"v":1, "arm": null}', "[]", "null", "1", '""', "{}"]) + "\n")
    add("bom_crlf", "\ufeff" + good + "\r\n" + good + "\r\n")
    add("invalid_utf8", good.encode()[:40] + b"\xff\xfe\xc0\x80" + good.encode()[40:] + b"\n")
    add("empty_file", "")
    add("nonexistent", kind="missing", path=os.path.join(out, "does-not-exist.jsonl"))
    manifest(out, rows)


# ---------------------------------------------------------------------------------------------
# 5. HTTP. Row: name, method, path, body file ("-": none), transfer (cl|chunked|declared:N),
#    expected statuses (comma list; "4xx" any 4xx).
# ---------------------------------------------------------------------------------------------
def http(out, quick):
    rows = []

    def add(name, body, path="/v1/completions", expect="400", transfer="cl", method="POST"):
        p = os.path.join(out, name + ".body")
        with open(p, "wb") as f:
            if callable(body):
                body(f)
            else:
                f.write(body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass"))
        rows.append((name, method, path, p, transfer, expect))

    def comp(**kw):
        d = {"model": "tiny", "prompt": "hi", "max_tokens": 1}
        d.update(kw)
        return json.dumps(d)

    def chat(**kw):
        d = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        d.update(kw)
        return json.dumps(d)

    add("baseline_ok", comp(), expect="200")
    for i, key in enumerate([" 5", "+6", "7\u00009", "-1", "1e3", "0x10", "", "\u0663", "5.0", "99999999999999999999",
                             "5 ", "\uff15", "07", "32000", "2147483648"]):
        add("logit_bias_key_%02d" % i, comp(logit_bias={key: 1}), expect="400" if key != "07" else "200,400")
    add("logit_bias_key_900KB", comp(logit_bias={"9" * 900000: 1}))
    add("logit_bias_301_entries", comp(logit_bias={str(i): 1 for i in range(301)}))
    add("logit_bias_value_1e400", comp().replace('"max_tokens": 1', '"max_tokens": 1, "logit_bias": {"5": 1e400}'))
    add("logit_bias_value_deep", comp().replace('"max_tokens": 1', '"max_tokens": 1, "logit_bias": {"5": '
                                                + "[" * 60 + "]" * 60 + "}"))
    body = comp()
    add("trailing_garbage", body + " garbage")
    add("trailing_second_object", body + body)
    add("trailing_nul_then_garbage", body.encode() + b"\x00garbage")
    add("trailing_whitespace_ok", body + " \n\t\r\n", expect="200")
    add("raw_nul_inside_string", body.replace('"hi"', '"h\x00i"'))
    add("escaped_nul_in_prompt_ok", body.replace('"hi"', '"h\\u0000i"'), expect="200")
    add("nul_before_json", b"\x00" + body.encode())
    add("invalid_utf8_in_string", body.encode().replace(b'"hi"', b'"h\xff\xfei"'))
    add("overlong_utf8", body.encode().replace(b'"hi"', b'"\xc0\xaf"'))
    add("lone_surrogate_escape", body.replace('"hi"', '"\\ud800"'))
    add("number_1e400", body.replace('"max_tokens": 1', '"max_tokens": 1, "temperature": 1e400'))
    add("top_p_1e-300", body.replace('"max_tokens": 1', '"max_tokens": 1, "top_p": 1e-300'))
    add("max_tokens_huge", body.replace('"max_tokens": 1', '"max_tokens": 1e30'))
    add("seed_2p64", body.replace('"max_tokens": 1', '"max_tokens": 1, "seed": 18446744073709551616'))
    add("n_65", comp(n=65))
    add("deep_100k_body", "[" * 100000 + "]" * 100000)
    add("deep_100k_prompt", comp().replace('"hi"', "[" * 100000 + "]" * 100000))
    add("deep_100k_messages", chat().replace('"hi"', "[" * 100000 + "]" * 100000), path="/v1/chat/completions")
    add("deep_100k_stop", comp().replace('"max_tokens": 1', '"max_tokens": 1, "stop": ' + "[" * 100000
                                         + "]" * 100000))
    add("deep_100k_objects", '{"a":' * 100000 + "1" + "}" * 100000)
    add("deep_100k_unclosed", "[" * 100000)
    add("body_17MiB_content_length", lambda f: f.write(b'{"prompt": "' + b"a" * (17 << 20) + b'"}'), expect="413")
    add("body_17MiB_chunked", lambda f: f.write(b'{"prompt": "' + b"a" * (17 << 20) + b'"}'), expect="413",
        transfer="chunked")
    add("declared_1TB_tiny_body", body, expect="413", transfer="declared:1000000000000")
    add("model_name_1MB", comp(model="m" * 1000000), expect="404")
    add("arm_name_1MB", comp(speculative={"arm": "a" * 1000000}))
    add("user_1MB_ok", comp(user="u" * 1000000), expect="200")
    add("unknown_field_name_1MB", comp(**{"f" * 1000000: 1}), expect="200")
    add("stop_1MB", comp(stop=["s" * 1000000]), expect="200,400")
    add("tool_choice_1MB", chat(tool_choice="t" * 1000000), path="/v1/chat/completions")
    add("response_format_1MB", chat(response_format={"type": "r" * 1000000}), path="/v1/chat/completions")
    add("role_1MB", chat().replace('"user"', '"' + "r" * 1000000 + '"'), path="/v1/chat/completions",
        expect="200,400")
    # 100k unknown field names in one body; then 3 bodies of 20k new names each (is every name kept?)
    add("unknown_fields_100k", comp(**{"x_%07d_%s" % (j, "p" * 100): 1 for j in range(100000)}), expect="200")
    for i in range(0 if quick else 3):
        add("unknown_fields_20k_batch%d" % i, comp(**{"y%d_%07d_%s" % (i, j, "p" * 100): 1 for j in range(20000)}),
            expect="200")
    add("messages_100k", chat(messages=[{"role": "user", "content": "m"}] * 100000),
        path="/v1/chat/completions", expect="200,400")
    add("tokenize_4MB_word", json.dumps({"prompt": "x" * 4000000}), path="/tokenize", expect="200,400")
    add("tokenize_15MB_word", json.dumps({"prompt": "x" * 15000000}), path="/tokenize", expect="200,400")
    add("detokenize_2M_ids", json.dumps({"tokens": [5735] * 2000000}), path="/detokenize", expect="200,400")
    add("completion_64_long_prompts", comp(prompt=[[5735] * 40000] * 64), expect="400")
    add("completion_prompt_4MB", comp(prompt="x " * 2000000), expect="400")
    add("get_with_body", body, method="GET", expect="405")
    add("not_json_content", b"\xff" * 1000)
    keep = {"baseline_ok", "logit_bias_key_00", "trailing_nul_then_garbage", "body_17MiB_content_length"}
    manifest(out, pick(rows, quick, keep))


def main():
    cls, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    quick = mode == "quick"
    os.makedirs(out, exist_ok=True)
    if cls == "plugins":
        plugins(out, quick, sys.argv[4])
    else:
        {"templates": templates, "gguf": gguf, "ablog": ablog, "http": http}[cls](out, quick)


if __name__ == "__main__":
    main()
