#!/usr/bin/env python3
"""Independent reference forward pass for Llama-family checkpoints (numpy only).

Reads a Hugging Face model directory (config.json + model.safetensors or a sharded
model.safetensors.index.json) and computes the logits of every position of a token list,
following the math of transformers' LlamaForCausalLM / MistralForCausalLM /
Qwen2ForCausalLM / Qwen3ForCausalLM / Qwen3MoeForCausalLM / MixtralForCausalLM /
Phi3ForCausalLM (written from the equations, not from transformers' code; Gemma 2 and 3 in
gemma_ref.py):

  x = embed[tokens]
  for each layer:
    h = rmsnorm(x) * w_in                         rmsnorm(x) = x / sqrt(mean(x^2) + eps)
    q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv
    q, k = rmsnorm(q) * w_qn, rmsnorm(k) * w_kn   Qwen3 only: per head, over head_dim
    q, k = rope(q), rope(k)                       rotate-half RoPE, inv_freq scaled per rope_scaling
    a = softmax(q k^T / sqrt(head_dim) + causal) v    (kv heads repeated for GQA; Mistral's
                                                  sliding_window: key j unseen when i - j >= window)
    x = x + a Wo^T (+ bo)
    h = rmsnorm(x) * w_post
    x = x + Wdown (silu(h Wgate^T) * (h Wup^T))
      mixture of experts (Qwen3-MoE, Mixtral): p = softmax(h Wrouter^T); the
      num_experts_per_tok experts of highest p (stable: the lower index first), weights p
      (divided by their sum when norm_topk_prob; Mixtral always); x = x + sum of weight *
      expert's Wdown (silu(h Wgate^T) * (h Wup^T))
  logits = (rmsnorm(x) * w_final) W_head^T        W_head = embed when tie_word_embeddings

Usage:
  /usr/bin/python3 tools/reference/llama_ref.py --model DIR --tokens 1,2,3 --out out.json [--hidden]
Output JSON: {"logits": [[...] per position], "vocab_size": V[, "hidden": [[...] per position]]}
("hidden" is the final hidden state after the final norm, the input of the LM head.)
"""

import argparse
import json
import math
import mmap
import os
import struct
import sys

import numpy as np

SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
             "Qwen3MoeForCausalLM", "MixtralForCausalLM", "Phi3ForCausalLM", "Gemma2ForCausalLM",
             "Gemma3ForCausalLM")


class Weights:
    """All tensors of a checkpoint, widened to `dtype` on first access."""

    def __init__(self, model_dir, dtype):
        self.dtype = dtype
        self.index = {}  # name -> (file, dtype string, shape, begin, end)
        self.cache = {}
        single = os.path.join(model_dir, "model.safetensors")
        if os.path.exists(single):
            files = [single]
        else:
            with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
                weight_map = json.load(f)["weight_map"]
            files = [os.path.join(model_dir, s) for s in sorted(set(weight_map.values()))]
        self.blobs = {}
        for path in files:
            with open(path, "rb") as f:
                blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            (n,) = struct.unpack("<Q", blob[:8])
            header = json.loads(blob[8:8 + n].decode("utf-8"))
            base = 8 + n
            self.blobs[path] = blob
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                begin, end = info["data_offsets"]
                self.index[name] = (path, info["dtype"], tuple(info["shape"]), base + begin, base + end)

    def has(self, name):
        return name in self.index

    def get(self, name):
        if name in self.cache:
            return self.cache[name]
        path, dtype, shape, begin, end = self.index[name]
        blob = self.blobs[path]
        if dtype == "F32":
            arr = np.frombuffer(blob, dtype="<f4", count=(end - begin) // 4, offset=begin)
        elif dtype == "F16":
            arr = np.frombuffer(blob, dtype="<f2", count=(end - begin) // 2, offset=begin).astype(np.float32)
        elif dtype == "BF16":
            bits = np.frombuffer(blob, dtype="<u2", count=(end - begin) // 2, offset=begin)
            arr = (bits.astype(np.uint32) << 16).view(np.float32)
        elif dtype in ("I64", "BOOL"):  # integer tensors (an EAGLE-3 head's d2t / t2d) stay integers
            kind = "<i8" if dtype == "I64" else "u1"
            arr = np.frombuffer(blob, dtype=kind, count=(end - begin) // (8 if dtype == "I64" else 1), offset=begin)
            arr = arr.reshape(shape).copy()
            self.cache[name] = arr
            return arr
        else:
            raise SystemExit(f"{path}: tensor {name} has unsupported dtype {dtype}")
        arr = arr.astype(self.dtype).reshape(shape)
        self.cache[name] = arr
        return arr


def inv_frequencies(cfg, head_dim):
    theta = float(cfg.get("rope_theta", 10000.0))
    inv_freq = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv_freq
    if kind == "linear":
        # Positions divided by factor == frequencies divided by factor.
        return inv_freq / float(scaling["factor"])
    if kind in ("longrope", "su"):
        # Phi-3: per-frequency factors, the long ones when the served context (--context)
        # exceeds original_max_position_embeddings.
        long = cfg.get("_context", 0) > cfg["original_max_position_embeddings"]
        return inv_freq / np.asarray(scaling["long_factor" if long else "short_factor"], dtype=np.float64)
    if kind == "llama3":
        factor = float(scaling["factor"])
        low = float(scaling["low_freq_factor"])
        high = float(scaling["high_freq_factor"])
        old_context = float(scaling["original_max_position_embeddings"])
        low_freq_wavelen = old_context / low
        high_freq_wavelen = old_context / high
        wavelen = 2.0 * math.pi / inv_freq
        # Long wavelengths (low frequencies) are slowed down by `factor`; short ones are kept;
        # the band in between interpolates linearly in old_context / wavelen.
        scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_context / wavelen - low) / (high - low)
        smoothed = (1.0 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
        return np.where(medium, smoothed, scaled)
    raise SystemExit(f"unsupported rope_scaling type {kind!r}")


def longrope_attention_factor(cfg):
    scaling = cfg.get("rope_scaling") or {}
    if scaling.get("rope_type", scaling.get("type")) not in ("longrope", "su"):
        return 1.0
    original = cfg["original_max_position_embeddings"]
    factor = scaling.get("factor", cfg["max_position_embeddings"] / original)
    return scaling.get("attention_factor", 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original)))


def rope(x, cos, sin):
    """x: [T, heads, head_dim]; cos/sin: [T, head_dim]. Rotate-half convention."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def rms_norm(x, weight, eps):
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return (x / np.sqrt(variance + eps)) * weight


def linear(x, w, b=None):
    y = x @ w.T
    return y + b if b is not None else y


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x):
    x = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(x)
    return e / np.sum(e, axis=-1, keepdims=True)


def decoder_block(x, w, prefix, cfg, cos, sin, dtype):
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    t = x.shape[0]

    def bias(name):
        return w.get(prefix + name) if w.has(prefix + name) else None

    h = rms_norm(x, w.get(prefix + "input_layernorm.weight"), eps)
    if w.has(prefix + "self_attn.qkv_proj.weight"):  # Phi-3: one fused projection, q then k then v
        qkv = linear(h, w.get(prefix + "self_attn.qkv_proj.weight"))
        q, k, v = np.split(qkv, [heads * head_dim, (heads + kv_heads) * head_dim], axis=-1)
    else:
        q = linear(h, w.get(prefix + "self_attn.q_proj.weight"), bias("self_attn.q_proj.bias"))
        k = linear(h, w.get(prefix + "self_attn.k_proj.weight"), bias("self_attn.k_proj.bias"))
        v = linear(h, w.get(prefix + "self_attn.v_proj.weight"), bias("self_attn.v_proj.bias"))
    q = q.reshape(t, heads, head_dim)
    k = k.reshape(t, kv_heads, head_dim)
    if w.has(prefix + "self_attn.q_norm.weight"):  # Qwen3
        q = rms_norm(q, w.get(prefix + "self_attn.q_norm.weight"), eps)
        k = rms_norm(k, w.get(prefix + "self_attn.k_norm.weight"), eps)
    q = rope(q, cos, sin)
    k = rope(k, cos, sin)
    v = v.reshape(t, kv_heads, head_dim)
    group = heads // kv_heads
    k = np.repeat(k, group, axis=1)  # query head i reads kv head i // group
    v = np.repeat(v, group, axis=1)
    scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(head_dim)
    causal = np.triu(np.ones((t, t), dtype=bool), k=1)
    windowed = ("MistralForCausalLM", "MixtralForCausalLM", "Phi3ForCausalLM")
    window = cfg.get("sliding_window") if any(a in windowed for a in cfg.get("architectures", [])) else None
    if window and window < cfg.get("max_position_embeddings", 2048):  # key j unseen from i when i - j >= window
        causal |= np.tril(np.ones((t, t), dtype=bool), k=-window)
    scores = np.where(causal[None, :, :], -np.inf, scores)
    probs = softmax(scores)
    attn = np.einsum("hqk,khd->qhd", probs, v).reshape(t, heads * head_dim)
    x = x + linear(attn, w.get(prefix + "self_attn.o_proj.weight"), bias("self_attn.o_proj.bias"))

    h = rms_norm(x, w.get(prefix + "post_attention_layernorm.weight"), eps)
    if "MixtralForCausalLM" in cfg.get("architectures", []):
        return (x + moe(h, w, prefix + "block_sparse_moe.", cfg, ("w1", "w3", "w2"), True)).astype(dtype)
    if "Qwen3MoeForCausalLM" in cfg.get("architectures", []):
        norm = cfg.get("norm_topk_prob", False)
        return (x + moe(h, w, prefix + "mlp.", cfg, ("gate_proj", "up_proj", "down_proj"), norm)).astype(dtype)
    if w.has(prefix + "mlp.gate_up_proj.weight"):  # Phi-3: gate rows, then up rows
        gate, up = np.split(linear(h, w.get(prefix + "mlp.gate_up_proj.weight")), 2, axis=-1)
    else:
        gate = linear(h, w.get(prefix + "mlp.gate_proj.weight"))
        up = linear(h, w.get(prefix + "mlp.up_proj.weight"))
    x = x + linear(silu(gate) * up, w.get(prefix + "mlp.down_proj.weight"))
    return x.astype(dtype)


def moe(h, w, prefix, cfg, names, norm_topk):
    """The routed experts' weighted sum, token by token."""
    k = cfg.get("num_experts_per_tok", 2)
    probs = softmax(linear(h, w.get(prefix + "gate.weight")))
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        order = np.argsort(-probs[t], kind="stable")[:k]
        weights = probs[t][order]
        if norm_topk:
            weights = weights / np.sum(weights)
        for e, weight in zip(order, weights):
            x = f"{prefix}experts.{e}."
            gate = linear(h[t:t + 1], w.get(x + names[0] + ".weight"))
            up = linear(h[t:t + 1], w.get(x + names[1] + ".weight"))
            out[t] += weight * linear(silu(gate) * up, w.get(x + names[2] + ".weight"))[0]
    return out


def forward(model_dir, tokens, dtype, context=0):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    cfg["_context"] = context
    archs = cfg.get("architectures") or []
    if not any(a in SUPPORTED for a in archs):
        raise SystemExit(f"{model_dir}/config.json: unsupported architectures {archs}")
    w = Weights(model_dir, dtype)
    embed = w.get("model.embed_tokens.weight")
    bad = [t for t in tokens if t < 0 or t >= embed.shape[0]]
    if bad:
        raise SystemExit(f"token ids {bad} are outside the vocabulary [0, {embed.shape[0]})")
    if any(a.startswith("Gemma") for a in archs):  # gemma_ref.py
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import gemma_ref
        return gemma_ref.forward(cfg, w, tokens, dtype)
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = float(cfg.get("rms_norm_eps", 1e-6))

    positions = np.arange(len(tokens), dtype=np.float64)
    freqs = np.outer(positions, inv_frequencies(cfg, head_dim))  # [T, head_dim / 2]
    angles = np.concatenate([freqs, freqs], axis=-1)
    scale = longrope_attention_factor(cfg)
    cos = (np.cos(angles) * scale).astype(dtype)
    sin = (np.sin(angles) * scale).astype(dtype)

    x = embed[np.asarray(tokens, dtype=np.int64)]
    for i in range(cfg["num_hidden_layers"]):
        x = decoder_block(x, w, f"model.layers.{i}.", cfg, cos, sin, dtype)
    hidden = rms_norm(x, w.get("model.norm.weight"), eps)
    tied = cfg.get("tie_word_embeddings", False) or not w.has("lm_head.weight")
    head = embed if tied else w.get("lm_head.weight")
    logits = hidden @ head.T
    return logits, hidden


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Hugging Face model directory")
    parser.add_argument("--tokens", required=True, help="comma-separated token ids")
    parser.add_argument("--out", required=True, help="output JSON file")
    parser.add_argument("--hidden", action="store_true", help="also write the final hidden states")
    parser.add_argument("--context", type=int, default=0,
                        help="the served context (specd's max_model_len): picks longrope's long factors "
                             "when above original_max_position_embeddings (default 0: the short ones)")
    parser.add_argument("--precision", choices=("float64", "float32"), default="float64",
                        help="arithmetic precision (default float64)")
    args = parser.parse_args(argv)

    tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    if not tokens:
        raise SystemExit("--tokens is empty")
    dtype = np.float64 if args.precision == "float64" else np.float32
    logits, hidden = forward(args.model, tokens, dtype, args.context)
    out = {"logits": logits.tolist(), "vocab_size": int(logits.shape[1]), "tokens": tokens}
    if args.hidden:
        out["hidden"] = hidden.tolist()
    with open(args.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
