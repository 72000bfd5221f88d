"""Independent reference forward for Gemma 2 and Gemma 3 checkpoints (numpy only), used by
llama_ref.py for those architectures. Written from the equations of transformers'
Gemma2ForCausalLM / Gemma3ForCausalLM:

  x = embed[tokens] * sqrt(hidden)
  for each layer (sliding or global attention, see below):
    h = gnorm(x, w_in)                              gnorm(x, w) = rmsnorm(x) * (1 + w)
    q, k, v = h Wq^T, h Wk^T, h Wv^T
    q, k = gnorm(q, w_qn), gnorm(k, w_kn)           Gemma 3 only: per head
    q, k = rope(q), rope(k)                         Gemma 3's sliding layers: rope_local_base_freq, unscaled
    s = q k^T * query_pre_attn_scalar^-0.5
    s = cap * tanh(s / cap)                         attn_logit_softcapping (Gemma 2)
    a = softmax(s + causal [+ window]) v            sliding layers: key j unseen when i - j >= sliding_window
    x = x + gnorm(a Wo^T, w_post_attn)
    x = x + gnorm(Wdown (gelu_tanh(h' Wgate^T) * (h' Wup^T)), w_post_ffw),  h' = gnorm(x, w_pre_ffw)
  logits = gnorm(x, w_final) embed^T, then cap * tanh(logits / cap)   final_logit_softcapping (Gemma 2)

Sliding layers: `layer_types` when given, else Gemma 2's even layers and Gemma 3's all but every
sliding_window_pattern-th (default 6).
"""

import math

import numpy as np

import llama_ref as ref


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gnorm(x, w, eps):
    return ref.rms_norm(x, 1.0 + w, eps)


def sliding_layers(cfg):
    n = cfg["num_hidden_layers"]
    if cfg.get("layer_types"):
        return [t == "sliding_attention" for t in cfg["layer_types"]]
    if "Gemma2ForCausalLM" in cfg.get("architectures", []):
        return [i % 2 == 0 for i in range(n)]
    pattern = cfg.get("sliding_window_pattern", 6)
    return [(i + 1) % pattern != 0 for i in range(n)]


def rope_tables(cfg, head_dim, t, dtype, local):
    if local:
        local_cfg = {"rope_theta": cfg.get("rope_local_base_freq", 10000.0)}
        inv = ref.inv_frequencies(local_cfg, head_dim)
    else:
        inv = ref.inv_frequencies(cfg, head_dim)
    freqs = np.outer(np.arange(t, dtype=np.float64), inv)
    angles = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def block(x, w, p, cfg, rope_cs, sliding, dtype):
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    gemma2 = "Gemma2ForCausalLM" in cfg.get("architectures", [])
    t = x.shape[0]
    h = gnorm(x, w.get(p + "input_layernorm.weight"), eps)
    q = ref.linear(h, w.get(p + "self_attn.q_proj.weight")).reshape(t, heads, head_dim)
    k = ref.linear(h, w.get(p + "self_attn.k_proj.weight")).reshape(t, kv_heads, head_dim)
    v = ref.linear(h, w.get(p + "self_attn.v_proj.weight")).reshape(t, kv_heads, head_dim)
    if not gemma2:
        q = gnorm(q, w.get(p + "self_attn.q_norm.weight"), eps)
        k = gnorm(k, w.get(p + "self_attn.k_norm.weight"), eps)
    cos, sin = rope_cs
    q, k = ref.rope(q, cos, sin), ref.rope(k, cos, sin)
    k = np.repeat(k, heads // kv_heads, axis=1)
    v = np.repeat(v, heads // kv_heads, axis=1)
    scores = np.einsum("qhd,khd->hqk", q, k) * float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5
    cap = cfg.get("attn_logit_softcapping", 50.0 if gemma2 else None)
    if cap:
        scores = cap * np.tanh(scores / cap)
    masked = np.triu(np.ones((t, t), dtype=bool), k=1)
    if sliding:
        masked |= np.tril(np.ones((t, t), dtype=bool), k=-int(cfg.get("sliding_window", 4096)))
    probs = ref.softmax(np.where(masked[None, :, :], -np.inf, scores))
    attn = np.einsum("hqk,khd->qhd", probs, v).reshape(t, heads * head_dim)
    x = x + gnorm(ref.linear(attn, w.get(p + "self_attn.o_proj.weight")), w.get(p + "post_attention_layernorm.weight"),
                  eps)
    h = gnorm(x, w.get(p + "pre_feedforward_layernorm.weight"), eps)
    mlp = ref.linear(gelu_tanh(ref.linear(h, w.get(p + "mlp.gate_proj.weight"))) *
                     ref.linear(h, w.get(p + "mlp.up_proj.weight")), w.get(p + "mlp.down_proj.weight"))
    return (x + gnorm(mlp, w.get(p + "post_feedforward_layernorm.weight"), eps)).astype(dtype)


def forward(cfg, w, tokens, dtype):
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    gemma2 = "Gemma2ForCausalLM" in cfg.get("architectures", [])
    t = len(tokens)
    global_cs = rope_tables(cfg, head_dim, t, dtype, False)
    local_cs = global_cs if gemma2 else rope_tables(cfg, head_dim, t, dtype, True)
    embed = w.get("model.embed_tokens.weight")
    x = embed[np.asarray(tokens, dtype=np.int64)] * math.sqrt(cfg["hidden_size"])
    for i, sliding in enumerate(sliding_layers(cfg)):
        x = block(x, w, f"model.layers.{i}.", cfg, local_cs if sliding else global_cs, sliding, dtype)
    hidden = gnorm(x, w.get("model.norm.weight"), eps)
    head = w.get("lm_head.weight") if w.has("lm_head.weight") else embed
    logits = hidden @ head.T
    cap = cfg.get("final_logit_softcapping", 30.0 if gemma2 else None)
    if cap:
        logits = cap * np.tanh(logits / cap)
    return logits, hidden
