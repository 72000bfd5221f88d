#!/usr/bin/python3
"""Trains specd's bundled default models from Debian's Python sources and documentation.

    nice -n 19 /usr/bin/python3 tools/train/train.py            # the full run, writes models/
    nice -n 19 /usr/bin/python3 tools/train/train.py --quick --out /tmp/m --work /tmp/w   # pipeline check

Stages (each one's result is kept in --work and reused when its inputs are unchanged):
  1. corpus     the standard library's .py files and the documentation's .rst sources (corpus.py)
  2. tokenizer  byte-level BPE, 4096 tokens (bpe.py), written as tokenizer.json + tokenizer_config.json
  3. encode     every document to ids with the official tokenizers library (encode.mjs)
  4. target     a Llama trained from scratch on next-token prediction
  5. draft      a one-layer Llama distilled from the frozen target (soft targets)
  6. mtp        DeepSeek-V3-style MTP modules trained on the frozen target
  7. export     BF16 safetensors + config.json + generation_config.json per model (export.py),
                held-out perplexity of target and draft, and training.json for the model card
Everything is seeded (--seed); with the same packages installed, the same torch and the same
thread count the run is repeatable. Progress lines give loss, tokens/s and the ETA of the stage.
"""

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402
import export  # noqa: E402
from model import CausalLM, Shape  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = 4096
CONTEXT = 512
STAGES = ("target", "draft", "mtp")
TARGET_NAME = "specd-py"
DRAFT_NAME = "specd-py-draft"

# Steps are fixed (not a time budget) so that the run is repeatable. Sized to fit 90 minutes on
# 2 idle cores (tools/train/README.md has the measured times); more steps (--target-steps ...)
# give a better model at the same shape.
FULL = {
    "target": Shape(VOCAB, 192, 4, 3, 3, 512, CONTEXT, mtp_modules=2),
    "draft": Shape(VOCAB, 128, 1, 2, 2, 384, CONTEXT),
    "target_steps": 2500, "draft_steps": 600, "mtp_steps": 600,
    "batch": 8, "code_fraction": 0.75, "doc_sample": 1,
}
# A pipeline check in a few minutes: a twentieth of the documents, tiny models, a few steps.
QUICK = {
    "target": Shape(VOCAB, 64, 2, 2, 2, 128, 128, mtp_modules=2),
    "draft": Shape(VOCAB, 32, 1, 1, 1, 64, 128),
    "target_steps": 30, "draft_steps": 10, "mtp_steps": 10,
    "batch": 4, "code_fraction": 0.75, "doc_sample": 20,
}


def cpu_seconds():
    """CPU time of this process (all threads) and of its finished children (node encode.mjs)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def log(msg):
    print(msg, flush=True)


def fmt_time(s):
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=lambda o: o.__dict__).encode())
    return h.hexdigest()[:16]


# ---- stages 1-3: corpus, tokenizer, ids ----------------------------------------------------


def split_documents(docs, sample):
    """Every 50th document of each kind is validation; of the rest every `sample`-th (1 = all)
    is training text."""
    train, val = {"code": [], "docs": []}, {"code": [], "docs": []}
    for kind in ("code", "docs"):
        group = [d for d in docs if d.kind == kind]
        val[kind] = group[25::50]
        train[kind] = [d for i, d in enumerate(group) if i % 50 != 25][::sample]
    return train, val


def encode(tokenizer_dir, texts, out_path):
    jsonl = out_path + ".jsonl"
    with open(jsonl, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "encode.mjs")
    try:
        subprocess.run(["node", script, "--tokenizer", tokenizer_dir, "--in", jsonl, "--out", out_path], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"encode: node {script} failed ({e}); run scripts/bootstrap.sh for node and tools/node_modules")
    os.remove(jsonl)
    return np.fromfile(out_path, dtype="<u2").astype(np.int64)


def prepare_data(cfg, work):
    t0 = time.time()
    docs = corpus.load_corpus()
    info = corpus.describe(docs)
    train_docs, val_docs = split_documents(docs, cfg["doc_sample"])
    log(f"corpus: {info['groups']}, sha256 {info['sha256'][:16]}; "
        f"validation: {len(val_docs['code'])} code + {len(val_docs['docs'])} docs files")
    bpe_docs = train_docs["code"] + train_docs["docs"]
    with open(bpe.__file__) as f:  # a change to the trainer or the file format makes a new tokenizer
        bpe_source = f.read()
    tok_dir = os.path.join(work, "tokenizer-" + digest(info["sha256"], VOCAB, [d.path for d in bpe_docs], bpe_source))
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        texts = [d.text for d in bpe_docs]
        tokens, merges = bpe.train(texts, VOCAB, progress=log)
        os.makedirs(tok_dir, exist_ok=True)
        bpe.write(tok_dir, tokens, merges, cfg["target"].max_positions)
    log(f"tokenizer: {tok_dir} ({time.time() - t0:.0f} s)")
    data = {}
    for split, group in (("train", train_docs), ("val", val_docs)):
        for kind in ("code", "docs"):
            path = os.path.join(tok_dir, f"{split}-{kind}-{digest([d.path for d in group[kind]])}.bin")
            if os.path.exists(path):
                data[(split, kind)] = np.fromfile(path, dtype="<u2").astype(np.int64)
            else:
                data[(split, kind)] = encode(tok_dir, [d.text for d in group[kind]], path)
    heldout_text = corpus.load_heldout(REPO)
    heldout = encode(tok_dir, [heldout_text], os.path.join(tok_dir, "heldout.bin"))[:-1]  # BOS + text, no EOS
    total = {f"{s}-{k}": int(len(v)) for (s, k), v in data.items()}
    log(f"encode: {total} tokens, held-out {len(heldout)} tokens ({time.time() - t0:.0f} s)")
    info["tokens"] = total
    info["validation_files"] = {k: len(v) for k, v in val_docs.items()}
    return tok_dir, data, heldout, heldout_text, info


# ---- batches ------------------------------------------------------------------------------


class Batches:
    """Random windows of CONTEXT+1 tokens; a window is code with probability code_fraction."""

    def __init__(self, data, split, context, batch, code_fraction, seed):
        self.code, self.docs = data[(split, "code")], data[(split, "docs")]
        self.context, self.batch, self.code_fraction = context, batch, code_fraction
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def next(self):
        rows = []
        for _ in range(self.batch):
            src = self.code if self.rng.random() < self.code_fraction else self.docs
            start = int(self.rng.integers(0, len(src) - self.context - 1))
            rows.append(src[start:start + self.context + 1])
        return torch.from_numpy(np.stack(rows))


# ---- training loops -------------------------------------------------------------------------


def optimizer(params, lr):
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def run_loop(name, steps, params, loss_fn, batches, val_fn, peak_lr, tokens_per_step, bf16):
    """The shared loop: AdamW, warmup + cosine, clipping, progress and validation lines.
    bf16: matrix products in BF16 (torch.autocast), weights and optimizer state in F32.
    Returns the stage's wall-clock and CPU seconds (all threads): on a busy machine the CPU
    seconds divided by the thread count estimate the time the stage takes on idle cores."""
    opt = optimizer(params, peak_lr)
    warmup = max(1, steps // 20)
    t0, c0 = time.time(), cpu_seconds()
    smooth = None
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, peak_lr, warmup)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(batches.next())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        smooth = loss.item() if smooth is None else 0.9 * smooth + 0.1 * loss.item()
        done = step + 1
        if done % 10 == 0 or done == steps:
            el = time.time() - t0
            log(f"{name} step {done}/{steps} loss {smooth:.4f} lr {opt.param_groups[0]['lr']:.2e} "
                f"{done * tokens_per_step / el:.0f} tokens/s elapsed {fmt_time(el)} "
                f"ETA {fmt_time(el / done * (steps - done))}")
        if done % 100 == 0 or done == steps:
            log(f"{name} step {done}/{steps} validation loss {val_fn():.4f}")
    return {"wall_s": time.time() - t0, "cpu_s": cpu_seconds() - c0}


def lm_loss(model, x):
    logits = model(x[:, :-1]).float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


def distill_loss(draft, target, x):
    """Cross-entropy of the draft against the target's full next-token distribution."""
    inp = x[:, :-1]
    with torch.no_grad():
        p = torch.softmax(target(inp).float(), dim=-1)
    return -(p * torch.log_softmax(draft(inp).float(), dim=-1)).sum(-1).mean()


def mtp_loss(target, x):
    """Mean over modules of module i's cross-entropy on token t+2+i (target frozen)."""
    inp = x[:, :-1]
    with torch.no_grad():
        h0 = target.hidden(inp)
    losses = []
    for i, logits in enumerate(target.mtp_logits(inp, h0)):
        n = inp.shape[1] - 2 - i  # rows whose token t+2+i lies inside the window
        logits = logits[:, :n].float()
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), inp[:, 2 + i:].reshape(-1)))
    return sum(losses) / len(losses)


@torch.no_grad()
def mean(fn, batches):
    return sum(fn(b).item() for b in batches) / len(batches)


def stage(work, name, key, build):
    """Loads <work>/<name>-<key>.pt when present, else runs build() and saves its result."""
    path = os.path.join(work, f"{name}-{key}.pt")
    if os.path.exists(path):
        log(f"{name}: reusing {path}")
        return torch.load(path)
    result = build()
    torch.save(result, path + ".tmp")
    os.replace(path + ".tmp", path)
    return result


# ---- evaluation ---------------------------------------------------------------------------


@torch.no_grad()
def heldout_loss(model, ids, window):
    """Mean negative log-likelihood per token of ids[1:], scored in windows of `window` tokens
    that overlap by one (every token but the first is scored once, with the context of its
    window). tests/e2e/bundled computes the same with specd."""
    total, count = 0.0, 0
    start = 0
    while start + 1 < len(ids):
        chunk = torch.from_numpy(ids[start:start + window]).unsqueeze(0)
        logp = torch.log_softmax(model(chunk[:, :-1]).double(), dim=-1)
        total -= logp.gather(-1, chunk[:, 1:].unsqueeze(-1)).sum().item()
        count += chunk.shape[1] - 1
        start += window - 1
    return total / count, count


class Run:
    """What every stage needs: options, data, validation batches and the reuse keys."""

    def __init__(self, args, cfg, data, corpus_info, tok_dir):
        self.args, self.cfg, self.data, self.tok_dir = args, cfg, data, tok_dir
        self.bf16 = args.precision == "bf16"
        self.ctx, self.batch = cfg["target"].max_positions, cfg["batch"]
        val = Batches(data, "val", self.ctx, self.batch, cfg["code_fraction"], args.seed + 100)
        self.val = [val.next() for _ in range(4)]
        # A stage is reused only when everything it depends on is unchanged.
        common = [corpus_info["sha256"], tok_dir, corpus_info["tokens"], self.batch, cfg["code_fraction"],
                  args.seed, args.precision]
        self.target_key = digest(common, cfg["target"], cfg["target_steps"])
        self.draft_key = digest(self.target_key, cfg["draft"], cfg["draft_steps"])
        self.mtp_key = digest(self.target_key, cfg["mtp_steps"])

    def loop(self, name, params, loss_fn, val_fn, peak_lr):
        """Runs stage `name` ("target", "draft", "mtp") with its own seeded stream of batches."""
        seed = self.args.seed + STAGES.index(name) + 1
        batches = Batches(self.data, "train", self.ctx, self.batch, self.cfg["code_fraction"], seed)
        return run_loop(name, self.cfg[name + "_steps"], params, loss_fn, batches, val_fn, peak_lr,
                        self.batch * self.ctx, self.bf16)


def train_target(run):
    def build():
        torch.manual_seed(run.args.seed + 1)  # initial weights
        m = CausalLM(run.cfg["target"])
        params = [p for n, p in m.named_parameters() if not n.startswith("mtp.")]
        log(f"target: {m.num_params(False) / 1e6:.2f} M parameters")
        seconds = run.loop("target", params, lambda x: lm_loss(m, x), lambda: mean(lambda x: lm_loss(m, x), run.val),
                           3e-3)
        return {"state": m.state_dict(), "seconds": seconds}

    res = stage(run.args.work, "target", run.target_key, build)
    target = CausalLM(run.cfg["target"])
    target.load_state_dict(res["state"])
    for p in target.parameters():
        p.requires_grad_(False)
    return target, res["seconds"]


def train_draft(run, target):
    def build():
        torch.manual_seed(run.args.seed + 2)  # initial weights
        d = CausalLM(run.cfg["draft"])
        log(f"draft: {d.num_params() / 1e6:.2f} M parameters, distilled from the target")
        seconds = run.loop("draft", list(d.parameters()), lambda x: distill_loss(d, target, x),
                           lambda: mean(lambda x: lm_loss(d, x), run.val), 3e-3)
        return {"state": d.state_dict(), "seconds": seconds}

    res = stage(run.args.work, "draft", run.draft_key, build)
    draft = CausalLM(run.cfg["draft"])
    draft.load_state_dict(res["state"])
    return draft, res["seconds"]


def train_mtp(run, target):
    """Trains target.mtp in place (everything else frozen)."""
    def build():
        torch.manual_seed(run.args.seed + 3)  # initial weights
        for m in target.mtp:
            m.apply(target._init)
        params = list(target.mtp.parameters())
        for p in params:
            p.requires_grad_(True)
        log(f"mtp: {sum(p.numel() for p in params) / 1e6:.2f} M parameters in {len(target.mtp)} modules")
        seconds = run.loop("mtp", params, lambda x: mtp_loss(target, x),
                           lambda: mean(lambda x: mtp_loss(target, x), run.val), 2e-3)
        for p in params:
            p.requires_grad_(False)
        return {"state": target.mtp.state_dict(), "seconds": seconds}

    res = stage(run.args.work, "mtp", run.mtp_key, build)
    target.mtp.load_state_dict(res["state"])
    return res["seconds"]


def evaluate(run, target, draft, heldout):
    """Held-out and validation figures of the BF16-rounded models (what the checkpoints hold)."""
    export.bf16_round(target)
    export.bf16_round(draft)
    evals = {}
    for name, m in (("target", target), ("draft", draft)):
        loss, n = heldout_loss(m, heldout, run.ctx)
        evals[name] = {"heldout_loss": loss, "heldout_perplexity": math.exp(loss), "heldout_tokens": n,
                       "validation_loss": mean(lambda x: lm_loss(m, x), run.val)}
        log(f"eval {name}: held-out loss {loss:.4f} perplexity {math.exp(loss):.3f} over {n} tokens; "
            f"validation loss {evals[name]['validation_loss']:.4f}")
    evals["mtp_validation_loss"] = mean(lambda x: mtp_loss(target, x), run.val)
    log(f"eval mtp: validation loss {evals['mtp_validation_loss']:.4f} (mean over modules)")
    return evals


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models"), help="where the model directories go")
    ap.add_argument("--work", default=os.path.join(REPO, "build", "train"), help="intermediate files")
    ap.add_argument("--quick", action="store_true", help="pipeline check on a slice of the corpus, tiny models")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=("bf16", "f32"), default="bf16",
                    help="matrix products while training (bf16: torch.autocast; faster where the CPU has AVX-512 BF16)")
    for name in STAGES:
        ap.add_argument(f"--{name}-steps", type=int, help=f"optimizer steps of the {name} stage (default: the plan's)")
    return ap.parse_args()


def main():
    args = parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    for name in STAGES:
        if getattr(args, f"{name}_steps") is not None:
            cfg[f"{name}_steps"] = getattr(args, f"{name}_steps")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.work, exist_ok=True)
    t_start = time.time()

    tok_dir, data, heldout, heldout_text, corpus_info = prepare_data(cfg, args.work)
    run = Run(args, cfg, data, corpus_info, tok_dir)
    seconds = {"data": {"wall_s": time.time() - t_start, "cpu_s": cpu_seconds()}}
    target, seconds["target"] = train_target(run)
    draft, seconds["draft"] = train_draft(run, target)
    seconds["mtp"] = train_mtp(run, target)
    evals = evaluate(run, target, draft, heldout)

    with open(os.path.join(tok_dir, "tokenizer.json")) as f:
        added = {t["content"]: t["id"] for t in json.load(f)["added_tokens"]}
    bos_id, eos_id = added[bpe.BOS], added[bpe.EOS]
    meta = {"format": "pt", "producer": "specd tools/train/train.py"}
    target_dir, draft_dir = os.path.join(args.out, TARGET_NAME), os.path.join(args.out, DRAFT_NAME)
    export.write_model_dir(target_dir, target, tok_dir, bos_id, eos_id, meta)
    export.write_model_dir(draft_dir, draft, tok_dir, bos_id, eos_id, meta)
    with open(os.path.join(target_dir, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(heldout_text)
    seconds["this_invocation"] = {"wall_s": time.time() - t_start, "cpu_s": cpu_seconds()}
    report = {
        "corpus": corpus_info,
        "heldout_files": list(corpus.HELDOUT_FILES),
        "seed": args.seed,
        "threads": args.threads,
        "precision": args.precision,
        "torch": torch.__version__,
        "cpu": cpu_name(),
        "plan": {k: (v.__dict__ if isinstance(v, Shape) else v) for k, v in cfg.items()},
        "parameters": {"target": target.num_params(False), "mtp": target.num_params() - target.num_params(False),
                       "draft": draft.num_params()},
        "seconds": seconds,
        "eval": evals,
    }
    with open(os.path.join(target_dir, "training.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    log(f"done in {fmt_time(time.time() - t_start)}: {target_dir}, {draft_dir}")


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
