#!/usr/bin/env python3
"""Trains an EAGLE-3 draft head for a target checkpoint in this project's Llama layout (by default
the bundled models/specd-py) and writes it in the public layout specd, vLLM and SGLang load
(docs/model-formats.md "EAGLE-3 heads").

  features   the target's residual stream entering layers 1, 2 and L (specd's convention; the
             outputs of layers 0, 1 and L-1), written as the top-level
             eagle_aux_hidden_state_layer_ids (vLLM's spelling, the same numbers)
  head       fc (3H -> H), one decoder layer over [input_layernorm(embed) | hidden_norm(g)], norm,
             lm_head over the full vocabulary (d2t all zero), the target's embeddings (not stored)
  training   "training-time test" (EAGLE-3): step 0 feeds the target's fused states, step j > 0
             feeds the head's own outputs of step j - 1, with the attention an inference step
             sees (step-0 keys of earlier positions, the earlier steps' keys along the draft, and
             itself); each step is distilled from the target's distribution of the token it
             predicts (soft cross-entropy), step j weighted 0.8^j
  data       the same corpus as tools/train/train.py, encoded with the target's tokenizer; with
             --regenerate, the target's own greedy continuations of prompts cut from it
             (EAGLE's regenerated data, tools/train/regenerate.py)

Usage (torch from Debian's python3-torch, as `make train`):
  nice -n 19 /usr/bin/python3 tools/train/eagle3.py [--target models/specd-py]
      [--out models/specd-py-eagle3] [--steps 600] [--ttt 3] [--layers 1,2,L] [--intermediate N] [--pool N]
      [--regenerate N [--specd build/release/bin/specd]]
"""

import argparse
import copy
import json
import math
import os
import struct
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
import model as M  # noqa: E402
import regenerate  # noqa: E402
from train import encode  # noqa: E402


def log(msg):
    print(f"[eagle3 {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def read_safetensors(path, skip=()):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or name in skip:
            continue
        b, e = info["data_offsets"]
        raw = blob[8 + n + b:8 + n + e]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif info["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        else:
            raise SystemExit(f"{path}: tensor {name} has dtype {info['dtype']}")
        out[name] = torch.from_numpy(arr.copy().reshape(info["shape"]))
    return out


def load_target(directory):
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    s = M.Shape(c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                c.get("num_key_value_heads", c["num_attention_heads"]), c["intermediate_size"],
                c["max_position_embeddings"], c.get("rope_theta", 10000.0), c.get("rms_norm_eps", 1e-5),
                c.get("tie_word_embeddings", False), c.get("num_nextn_predict_layers", 0))
    m = M.CausalLM(s)
    m.load_state_dict(read_safetensors(os.path.join(directory, "model.safetensors")))
    m.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


class MidLayer(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        h = s.hidden
        self.input_layernorm = M.RMSNorm(h, s.eps)
        self.hidden_norm = M.RMSNorm(h, s.eps)
        self.self_attn = M.Attention(s)
        self.self_attn.q_proj = nn.Linear(2 * h, s.heads * s.head_dim, bias=False)
        self.self_attn.k_proj = nn.Linear(2 * h, s.kv_heads * s.head_dim, bias=False)
        self.self_attn.v_proj = nn.Linear(2 * h, s.kv_heads * s.head_dim, bias=False)
        self.post_attention_layernorm = M.RMSNorm(h, s.eps)
        self.mlp = M.MLP(s)


class Head(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.fc = nn.Linear(3 * s.hidden, s.hidden, bias=False)
        self.midlayer = MidLayer(s)
        self.norm = M.RMSNorm(s.hidden, s.eps)
        self.lm_head = nn.Linear(s.hidden, s.vocab_size, bias=False)
        for mod in self.modules():
            if isinstance(mod, nn.Linear):
                nn.init.normal_(mod.weight, std=0.02)

    def qkv(self, g, emb, cos, sin):
        """q, k, v [B, heads, T, head_dim] of inputs g (states) and emb (token embeddings)."""
        s, a = self.s, self.midlayer
        x = torch.cat([a.input_layernorm(emb), a.hidden_norm(g)], dim=-1)
        b, t, _ = x.shape
        at = a.self_attn
        q = at.q_proj(x).view(b, t, s.heads, s.head_dim).transpose(1, 2)
        k = at.k_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        v = at.v_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        q = q * cos + M._rotate_half(q) * sin
        k = k * cos + M._rotate_half(k) * sin
        if s.kv_heads != s.heads:
            k = k.repeat_interleave(s.heads // s.kv_heads, dim=1)
            v = v.repeat_interleave(s.heads // s.kv_heads, dim=1)
        return q, k, v

    def finish(self, g, q, keys, values, mask):
        """The layer's output (pre-norm state) and logits, given the step's visible keys."""
        s, a = self.s, self.midlayer
        b, _, t, _ = q.shape
        scores = (q @ keys.transpose(-1, -2)) / math.sqrt(s.head_dim) + mask
        att = (torch.softmax(scores, dim=-1) @ values).transpose(1, 2).reshape(b, t, s.heads * s.head_dim)
        x = g + a.self_attn.o_proj(att)
        x = x + a.mlp(a.post_attention_layernorm(x))
        return x, self.lm_head(self.norm(x))


def features(target, tokens, layers):
    """The residual stream entering each of `layers` (specd's convention) [B, T, 3H], and the
    target's logits [B, T, V]."""
    t = tokens.shape[1]
    cos, sin = target.rope(t)
    mask = M.causal_mask(t)
    x = target.model.embed_tokens(tokens)
    caught = {}
    for i, layer in enumerate(target.model.layers):
        if i in layers:
            caught[i] = x
        x = layer(x, cos, sin, mask)
    caught[len(target.model.layers)] = x
    return torch.cat([caught[l] for l in layers], dim=-1), target.head(target.model.norm(x))


def target_view(target, tokens, layers):
    """What training needs of the target for windows `tokens`: fused features and distributions."""
    with torch.no_grad():
        feats, tlogits = features(target, tokens, layers)
        return feats, torch.softmax(tlogits.float(), dim=-1)


def ttt_loss(head, target, tokens, feats, tprobs, steps):
    """Training-time test over windows `tokens` [B, T+1] with the target's features and
    distributions of them; returns (loss, accuracy of step 0)."""
    n = tokens.shape[1] - 2  # head positions p = 0..n-1: input (state p, token p+1), predicts p+2
    cos, sin = target.rope(n)
    emb = target.model.embed_tokens
    pos = torch.arange(n)
    keys, values, loss, acc = [], [], 0.0, 0.0
    out = head.fc(feats[:, :n])  # step 0 feeds the fused states; step j > 0 the previous step's outputs (`out`)
    for j in range(steps):
        m = n - j  # step j runs head positions q = j..n-1 (a draft j deep after position q - j)
        if m <= 0:
            break
        tok = tokens[:, 2 + j - 1:2 + j - 1 + m] if j > 0 else tokens[:, 1:1 + n]
        gj = out[:, :m]
        q, k, v = head.qkv(gj, emb(tok), cos[j:j + m], sin[j:j + m])
        keys.append(k)
        values.append(v)
        qpos = pos[j:j + m]
        # Visible: step-0 keys at positions <= q - j, step-i keys (0 < i <= j) at position q - j + i.
        masks = []
        for i in range(j + 1):
            kpos = pos[i:i + keys[i].shape[2]]
            visible = (kpos[None, :] <= (qpos[:, None] - j)) if i == 0 else (kpos[None, :] == (qpos[:, None] - j + i))
            masks.append(torch.where(visible, 0.0, float("-inf")))
        mask = torch.cat(masks, dim=1)
        out, logits = head.finish(gj, q, torch.cat(keys, dim=2), torch.cat(values, dim=2), mask)
        want = tprobs[:, 1 + j:1 + j + m]  # the target's distribution of token q + 2
        loss = loss + (0.8 ** j) * -(want * F.log_softmax(logits.float(), dim=-1)).sum(-1).mean()
        if j == 0:
            acc = (logits.argmax(-1) == want.argmax(-1)).float().mean().item()
    return loss, acc


def init_head(head, directory):
    """Loads a head this script wrote (its weights; the vocabulary maps are all-identity here)."""
    path = os.path.join(directory, "model.safetensors")
    got, want = read_safetensors(path, skip=("d2t", "t2d")), head.state_dict()
    if sorted(got) != sorted(want):
        raise SystemExit(f"{path}: tensors {sorted(got)} are not this script's head ({sorted(want)})")
    for name, t in got.items():
        if tuple(t.shape) != tuple(want[name].shape):
            raise SystemExit(f"{path}: tensor {name} has shape {list(t.shape)}, the head needs {list(want[name].shape)}")
    head.load_state_dict(got)


def write_head(directory, head, s, layers, tokenizer_dir):
    os.makedirs(directory, exist_ok=True)
    tensors = {k: v for k, v in head.state_dict().items()}
    header, blobs, offset = {}, [], 0

    def add(name, dtype, shape, data):
        nonlocal offset
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)

    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.bfloat16).contiguous()
        add(name, "BF16", list(t.shape), t.view(torch.int16).numpy().astype("<i2").tobytes())
    add("d2t", "I64", [s.vocab_size], np.zeros(s.vocab_size, dtype="<i8").tobytes())
    add("t2d", "BOOL", [s.vocab_size], np.ones(s.vocab_size, dtype="u1").tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "vocab_size": s.vocab_size,
              "draft_vocab_size": s.vocab_size, "hidden_size": s.hidden, "target_hidden_size": s.hidden,
              "intermediate_size": s.intermediate, "num_hidden_layers": 1, "num_attention_heads": s.heads,
              "num_key_value_heads": s.kv_heads, "head_dim": s.head_dim, "hidden_act": "silu",
              "max_position_embeddings": s.max_positions, "rms_norm_eps": s.eps, "rope_theta": s.rope_theta,
              "eagle_aux_hidden_state_layer_ids": layers, "torch_dtype": "bfloat16"}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def parse_layers(text, num_layers):
    if not text:
        return [1, 2, num_layers]  # the stream entering layers 1, 2 and L (outputs of 0, 1, L-1)
    try:
        layers = [num_layers if f.strip() == "L" else int(f) for f in text.split(",")]
    except ValueError:
        raise SystemExit(f"--layers {text!r}: want three comma-separated layer indices (or L)")
    if len(layers) != 3 or any(not 0 <= i <= num_layers for i in layers) or layers != sorted(set(layers)):
        raise SystemExit(f"--layers {text!r}: want three increasing indices in [0, {num_layers}]")
    return layers


class Pool:
    """Windows with their target features and distributions (f16), computed once."""

    def __init__(self, target, tokens, layers, chunk=8):
        self.tokens = tokens
        feats, probs = [], []
        for i in range(0, len(tokens), chunk):
            f, p = target_view(target, tokens[i:i + chunk], layers)
            feats.append(f.half())
            probs.append(p.half())
        self.feats, self.probs = torch.cat(feats), torch.cat(probs)

    def sample(self, rng, n):
        idx = torch.from_numpy(rng.integers(0, len(self.tokens), size=n))
        return self.tokens[idx], self.feats[idx].float(), self.probs[idx].float()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default=os.path.join(HERE, "..", "..", "models", "specd-py"))
    p.add_argument("--out", default=os.path.join(HERE, "..", "..", "models", "specd-py-eagle3"))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--ttt", type=int, default=3, help="training-time-test steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (warm-up 50 steps, cosine decay)")
    p.add_argument("--init", help="continue from this head directory (written by this script) instead of random weights")
    p.add_argument("--docs", type=int, default=400, help="train on the first N code documents of the corpus (0: all)")
    p.add_argument("--with-rst", action="store_true", help="add the corpus's reStructuredText documents")
    p.add_argument("--layers", help="comma-separated residual streams to fuse (the stream entering layer i; "
                   "L = after the last layer); default 1,2,L")
    p.add_argument("--intermediate", type=int, help="the head's MLP width (default: the target's)")
    p.add_argument("--pool", type=int, default=0,
                   help="windows whose target features are computed once and sampled from at every step "
                        "(0: fresh windows and a target forward every step); for targets much larger "
                        "than the head")
    p.add_argument("--regenerate", type=int, default=0,
                   help="train on N windows the target wrote: prompts cut from the training text, continued "
                        "greedily by `specd generate` (tools/train/regenerate.py); 0: the text itself")
    p.add_argument("--specd", default=os.path.join(HERE, "..", "..", "build", "release", "bin", "specd"),
                   help="the specd binary --regenerate runs")
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    torch.set_num_threads(2)
    target = load_target(a.target)
    s = target.s
    layers = parse_layers(a.layers, s.layers)
    hs = copy.copy(s)  # the head's shape: the target's but for the MLP width
    hs.intermediate = a.intermediate or s.intermediate
    docs = corpus.load_corpus()
    code = [d.text for d in docs if d.kind == "code"]
    texts = (code[:a.docs] if a.docs > 0 else code) + ([d.text for d in docs if d.kind == "docs"] if a.with_rst else [])
    ids = None
    if a.regenerate == 0:  # else the windows come from the target (texts are only its prompts)
        with tempfile.TemporaryDirectory() as tmp:
            ids = encode(a.target, texts, os.path.join(tmp, "train.bin"))
    corpus_size = f"{len(ids)} tokens" if ids is not None else f"{len(texts)} documents for prompts"
    log(f"target {a.target}: {s.layers} layers, hidden {s.hidden}; corpus {corpus_size}; layers {layers}")
    head = Head(hs)
    if a.init:
        init_head(head, a.init)
        log(f"starting from {a.init}")
    opt = torch.optim.AdamW(head.parameters(), lr=2e-3, weight_decay=0.0)
    rng = np.random.Generator(np.random.PCG64(a.seed))
    t0 = time.time()
    if a.regenerate > 0:
        own = regenerate.regenerate(a.specd, a.target, texts, a.regenerate, a.window, s.max_positions, rng, log)
        log(f"regenerated {len(own)} windows with {a.specd} ({time.time() - t0:.0f} s)")
        windows = lambda n: torch.from_numpy(own[rng.integers(0, len(own), size=n)])  # noqa: E731
    else:
        windows = lambda n: torch.from_numpy(  # noqa: E731
            np.stack([ids[s0:s0 + a.window + 2] for s0 in rng.integers(0, len(ids) - a.window - 2, size=n)]))
    pool = None
    if a.pool > 0:
        pool = Pool(target, torch.from_numpy(own[:a.pool]) if a.regenerate > 0 else windows(a.pool), layers)
        log(f"pool: {len(pool.tokens)} windows of {a.window + 2} tokens, target features computed "
            f"({time.time() - t0:.0f} s)")
    for step in range(1, a.steps + 1):
        if pool:
            batch, feats, tprobs = pool.sample(rng, a.batch)
        else:
            batch = windows(a.batch)
            feats, tprobs = target_view(target, batch, layers)
        lr = a.lr * min(1.0, step / 50) * 0.5 * (1 + math.cos(math.pi * step / a.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        loss, acc = ttt_loss(head, target, batch, feats, tprobs, a.ttt)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == 1:
            log(f"step {step}/{a.steps}: loss {loss.item():.3f}, step-0 agreement {acc:.3f} ({time.time() - t0:.0f} s)")
    write_head(a.out, head, hs, layers, a.target)
    log(f"wrote {a.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
