"""Training windows written by the target itself (EAGLE's "regenerated" data).

A draft head is used on the target's own continuations: at inference every token it reads after
the prompt is one the target chose. Training on the target's greedy continuations of prompts
from the training text teaches the head what the target writes, not only what the corpus says.

The target runs in specd (`specd generate --json`, greedy): the same tokenizer, the same
arithmetic as at inference, and thousands of tokens per second where a cache-less PyTorch
forward would recompute every prefix.
"""

import json
import subprocess

import numpy as np


def _run(cmd, what):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", "") or ""
        raise SystemExit(f"regenerate: {what} failed: {e} {err.strip()[-400:]}")


def prompt_ids(specd, target, text):
    """The ids specd gives `text` as a prompt (BOS first, as `generate` adds it)."""
    out = _run([specd, "--log-level", "error", "tokenize", "--tokenizer", target, "--json", "--text", text],
               f"specd tokenize ({target})")
    return json.loads(out)


def continuation(specd, target, text, tokens):
    out = _run([specd, "--log-level", "error", "generate", "--model", target, "--prompt", text, "--max-tokens",
                str(tokens), "--temperature", "0", "--ignore-eos", "--json"], f"specd generate ({target})")
    return json.loads(out)["token_ids"]


def prompt_text(texts, rng, chars):
    """About `chars` characters of a random training document, from a line start."""
    if not any(len(t) > chars for t in texts):
        raise SystemExit(f"regenerate: no training document is longer than {chars} characters")
    while True:  # draws until a long enough one (the draws of the shipped head's training)
        t = texts[rng.integers(0, len(texts))]
        if len(t) > chars:
            start = t.rfind("\n", 0, int(rng.integers(0, len(t) - chars))) + 1
            return t[start:start + chars]


def regenerate(specd, target, texts, n, window, context, rng, log):
    """n windows of window + 2 ids [n, window + 2]: the end of a prompt cut from `texts`, then
    the target's greedy continuation of it (at least half of every window). Prompts that leave
    the continuation no room in the target's `context` are skipped."""
    gen = window // 2 + 2
    rows, tries = [], 0
    while len(rows) < n:
        tries += 1
        if tries > 20 * n + 100:
            raise SystemExit(f"regenerate: {tries - 1} prompts gave {len(rows)} windows; a window of {window} tokens "
                             f"needs prompts of {window + 2 - gen} tokens with {gen} more in a context of {context}")
        text = prompt_text(texts, rng, 3 * window)  # code: about 1 token per 3-4 characters
        ids = prompt_ids(specd, target, text)
        if len(ids) < window + 2 - gen or len(ids) + gen > context:
            continue
        seq = ids + continuation(specd, target, text, gen)
        rows.append(seq[-(window + 2):])
        if len(rows) % 200 == 0:
            log(f"regenerated {len(rows)}/{n} windows")
    return np.array(rows, dtype=np.int64)
