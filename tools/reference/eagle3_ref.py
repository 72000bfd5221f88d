#!/usr/bin/env python3
"""Independent reference forward of an EAGLE-3 draft head (numpy only), for the runtime tests.

Reads an EAGLE-3 head directory in the public layout (config.json architectures
LlamaForCausalLMEagle3; fc, midlayer.*, norm, lm_head over the draft vocabulary, d2t) and its
target's directory (for the embeddings when the head has none), and runs a fresh sequence of
tokens (positions 0..T-1) with one input state per token, written from the equations:

  g = inputs @ fc^T          when the rows are 3 * target hidden wide (the target's fused states)
  g = inputs                 otherwise (the head's own previous outputs)
  a = [rmsnorm(embed[t]) * w_input_layernorm | rmsnorm(g) * w_hidden_norm]
  x = g + o_proj(causal attention of q, k, v = a Wq^T, a Wk^T, a Wv^T with rotate-half RoPE)
  x = x + Wdown (silu(h Wgate^T) * (h Wup^T)),  h = rmsnorm(x) * w_post_attention_layernorm
  draft_logits = (rmsnorm(x) * w_norm) lm_head^T, the draft token i being target token i + d2t[i]

Usage:
  /usr/bin/python3 tools/reference/eagle3_ref.py --head DIR --target DIR --tokens 1,2,3 \
      --inputs inputs.json --out out.json
inputs.json: [[...] per token]. Output JSON: {"draft_logits": [[...] per token], "target_ids":
[...], "hidden": [[...] per token]} ("hidden" is x before the final norm).
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import Weights, inv_frequencies, linear, rms_norm, rope, silu, softmax  # noqa: E402


def forward(head_dir, target_dir, tokens, inputs):
    with open(os.path.join(head_dir, "config.json")) as f:
        cfg = json.load(f)
    if "LlamaForCausalLMEagle3" not in (cfg.get("architectures") or []):
        raise SystemExit(f"{head_dir}/config.json: not an EAGLE-3 head")
    dtype = np.float64
    w = Weights(head_dir, dtype)
    embed = w.get("embed_tokens.weight") if w.has("embed_tokens.weight") else Weights(target_dir, dtype).get(
        "model.embed_tokens.weight")
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    t = len(tokens)
    g = np.asarray(inputs, dtype=dtype)
    if g.shape[1] != hidden:
        g = g @ w.get("fc.weight").T
    m = "midlayer."
    a = np.concatenate([rms_norm(embed[np.asarray(tokens)], w.get(m + "input_layernorm.weight"), eps),
                        rms_norm(g, w.get(m + "hidden_norm.weight"), eps)], axis=-1)
    positions = np.arange(t, dtype=np.float64)
    freqs = np.outer(positions, inv_frequencies(cfg, head_dim))
    angles = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(angles), np.sin(angles)
    q = rope(linear(a, w.get(m + "self_attn.q_proj.weight")).reshape(t, heads, head_dim), cos, sin)
    k = rope(linear(a, w.get(m + "self_attn.k_proj.weight")).reshape(t, kv_heads, head_dim), cos, sin)
    v = linear(a, w.get(m + "self_attn.v_proj.weight")).reshape(t, kv_heads, head_dim)
    group = heads // kv_heads
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(head_dim)
    scores = np.where(np.triu(np.ones((t, t), dtype=bool), k=1)[None, :, :], -np.inf, scores)
    attn = np.einsum("hqk,khd->qhd", softmax(scores), v).reshape(t, heads * head_dim)
    x = g + linear(attn, w.get(m + "self_attn.o_proj.weight"))
    h = rms_norm(x, w.get(m + "post_attention_layernorm.weight"), eps)
    x = x + linear(silu(linear(h, w.get(m + "mlp.gate_proj.weight"))) * linear(h, w.get(m + "mlp.up_proj.weight")),
                   w.get(m + "mlp.down_proj.weight"))
    draft_logits = rms_norm(x, w.get("norm.weight"), eps) @ w.get("lm_head.weight").T
    d2t = w.get("d2t")
    return draft_logits, np.arange(len(d2t)) + d2t, x


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--head", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    tokens = [int(x) for x in a.tokens.split(",") if x]
    with open(a.inputs) as f:
        inputs = json.load(f)
    logits, ids, x = forward(a.head, a.target, tokens, inputs)
    with open(a.out, "w") as f:
        json.dump({"draft_logits": logits.tolist(), "target_ids": [int(i) for i in ids], "hidden": x.tolist()}, f)


if __name__ == "__main__":
    main(sys.argv[1:])
