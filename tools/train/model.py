"""The Llama forward (the graph specd runs, as in transformers' LlamaForCausalLM) and the
DeepSeek-V3-style MTP module, in torch, for training.

Shapes: tokens [B, T] int64; hidden states [B, T, H]; logits [B, T, V].
Parameter names follow the Hugging Face checkpoint names (export.py writes them as they are):
  model.embed_tokens.weight, model.layers.N.*, model.norm.weight, lm_head.weight (untied only),
  mtp.I.{enorm,hnorm,eh_proj}.weight and mtp.I.block.* (docs/model-formats.md, "MTP modules").
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Shape:
    """The architecture of one model; to_config() gives its config.json fields."""

    def __init__(self, vocab_size, hidden, layers, heads, kv_heads, intermediate, max_positions,
                 rope_theta=10000.0, eps=1e-5, tie=True, mtp_modules=0):
        self.vocab_size = vocab_size
        self.hidden = hidden
        self.layers = layers
        self.heads = heads
        self.kv_heads = kv_heads
        self.head_dim = hidden // heads
        self.intermediate = intermediate
        self.max_positions = max_positions
        self.rope_theta = rope_theta
        self.eps = eps
        self.tie = tie
        self.mtp_modules = mtp_modules

    def to_config(self, bos_id, eos_id):
        c = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": self.max_positions,
            "rms_norm_eps": self.eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "attention_bias": False,
            "mlp_bias": False,
            "tie_word_embeddings": self.tie,
            "bos_token_id": bos_id,
            "eos_token_id": eos_id,
            "torch_dtype": "bfloat16",
        }
        if self.mtp_modules:
            c["num_nextn_predict_layers"] = self.mtp_modules
        return c


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(shape, length):
    """cos, sin [length, head_dim] for rotate-half RoPE (the HF Llama convention)."""
    inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, shape.head_dim, 2, dtype=torch.float32) / shape.head_dim))
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.q_proj = nn.Linear(s.hidden, s.heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(s.hidden, s.kv_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(s.hidden, s.kv_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.heads * s.head_dim, s.hidden, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        s = self.s
        q = self.q_proj(x).view(b, t, s.heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        if s.kv_heads != s.heads:
            rep = s.heads // s.kv_heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(s.head_dim)) + mask
        a = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(a.transpose(1, 2).reshape(b, t, s.heads * s.head_dim))


class MLP(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden, s.intermediate, bias=False)
        self.up_proj = nn.Linear(s.hidden, s.intermediate, bias=False)
        self.down_proj = nn.Linear(s.intermediate, s.hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden, s.eps)
        self.self_attn = Attention(s)
        self.post_attention_layernorm = RMSNorm(s.hidden, s.eps)
        self.mlp = MLP(s)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


def causal_mask(t):
    return torch.full((t, t), float("-inf")).triu(1)


class Backbone(nn.Module):
    """model.*: embeddings, decoder layers, final norm."""

    def __init__(self, s):
        super().__init__()
        self.embed_tokens = nn.Embedding(s.vocab_size, s.hidden)
        self.layers = nn.ModuleList(DecoderLayer(s) for _ in range(s.layers))
        self.norm = RMSNorm(s.hidden, s.eps)


class MTPModule(nn.Module):
    """mtp.I.*: h' = block(eh_proj(concat(enorm(embed(next token)), hnorm(h)))), unnormed."""

    def __init__(self, s):
        super().__init__()
        self.enorm = RMSNorm(s.hidden, s.eps)
        self.hnorm = RMSNorm(s.hidden, s.eps)
        self.eh_proj = nn.Linear(2 * s.hidden, s.hidden, bias=False)
        self.block = DecoderLayer(s)

    def forward(self, hidden, next_embed, cos, sin, mask):
        x = self.eh_proj(torch.cat([self.enorm(next_embed), self.hnorm(hidden)], dim=-1))
        return self.block(x, cos, sin, mask)


class CausalLM(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.model = Backbone(s)
        if not s.tie:
            self.lm_head = nn.Linear(s.hidden, s.vocab_size, bias=False)
        self.mtp = nn.ModuleList(MTPModule(s) for _ in range(s.mtp_modules))
        self._rope = None
        self.apply(self._init)

    def _init(self, m):
        # GPT-2 style: N(0, 0.02) for every matrix, ones for the norms (RMSNorm's default);
        # the projections that write into the residual stream scaled by 1/sqrt(2 * layers).
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, (Attention, MLP)):
            out = m.o_proj if isinstance(m, Attention) else m.down_proj
            nn.init.normal_(out.weight, std=0.02 / math.sqrt(2 * max(1, self.s.layers)))

    def head(self, normed):
        w = self.model.embed_tokens.weight if self.s.tie else self.lm_head.weight
        return normed @ w.t()

    def rope(self, t):
        if self._rope is None or self._rope[0].shape[0] < t:
            self._rope = rope_tables(self.s, max(t, self.s.max_positions))
        return self._rope[0][:t], self._rope[1][:t]

    def hidden(self, tokens):
        """The final hidden state after model.norm [B, T, H] (what specd hands the MTP proposer)."""
        t = tokens.shape[1]
        cos, sin = self.rope(t)
        mask = causal_mask(t)
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x)

    def forward(self, tokens):
        return self.head(self.hidden(tokens))

    def mtp_logits(self, tokens, h0):
        """Logits of every MTP module: list over modules i of [B, T-1-i, V], where row t predicts
        token t+2+i from h_i[t] and token t+1+i (h_0 = `h0`, the target's normed hidden state;
        h_{i+1} = model.norm(module i's output), as specd chains them)."""
        out = []
        h = h0
        for i, module in enumerate(self.mtp):
            n = tokens.shape[1] - 1 - i
            cos, sin = self.rope(n)
            x = module(h[:, :n], self.model.embed_tokens(tokens[:, 1 + i:1 + i + n]), cos, sin, causal_mask(n))
            h = self.model.norm(x)
            out.append(self.head(h))
        return out

    def num_params(self, include_mtp=True):
        return sum(p.numel() for n, p in self.named_parameters() if include_mtp or not n.startswith("mtp."))
