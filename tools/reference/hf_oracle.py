#!/usr/bin/env python3
"""Hugging Face transformers as an outside logits oracle for specd (scripts/gpu-check.sh).

Loads a Llama-family checkpoint directory (a specd-fixture output) with transformers'
AutoModelForCausalLM in float32 (16-bit weights are widened exactly, as specd widens them),
then compares it with specd's own outputs on the same token ids:
  --score NAME=FILE    `specd score --json` output (the prompt's log-probabilities); the prompt
                       ids are its first_token_id followed by its tokens' ids
  --generate NAME=FILE `specd generate --json --temperature 0` output over the same prompt; its
                       token_ids are compared with transformers' greedy continuation
  --info NAME          NAME's comparisons are reported, not judged (the CPU path, which rounds
                       activations to bf16 or 8 bits, beside the device, which keeps them F32)
Prints one line per comparison and writes them as JSON to --out. Exits 1 when a score differs by
more than --tolerance (per token log-probability) or a greedy continuation differs before the
first position whose top-2 margin in the oracle is below --margin (the rule stated in
docs/cuda.md: below that margin float32 summation order may legitimately flip the argmax).
"""

import argparse
import json
import sys

import torch
from transformers import AutoModelForCausalLM


def parse_pairs(items):
    out = []
    for item in items or []:
        name, _, path = item.partition("=")
        if not path:
            sys.exit(f"hf_oracle: '{item}' is not NAME=FILE")
        with open(path, encoding="utf-8") as f:
            out.append((name, json.load(f)))
    return out


def prompt_ids(score):
    return [score["first_token_id"]] + [t["id"] for t in score["tokens"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--score", action="append")
    ap.add_argument("--generate", action="append")
    ap.add_argument("--info", action="append", default=[])
    ap.add_argument("--tolerance", type=float, default=2e-3)
    ap.add_argument("--margin", type=float, default=1e-3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    scores = parse_pairs(a.score)
    generates = parse_pairs(a.generate)
    if not scores:
        sys.exit("hf_oracle: at least one --score is needed (it gives the prompt ids)")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32, attn_implementation="eager")
    model.to(device).eval()
    ids = prompt_ids(scores[0][1])
    results = []
    failed = False
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=device)).logits[0].double()
        lp = torch.log_softmax(logits, dim=-1)
        ref = [lp[i, ids[i + 1]].item() for i in range(len(ids) - 1)]
        for name, s in scores:
            if prompt_ids(s) != ids:
                sys.exit(f"hf_oracle: {name}'s prompt ids differ from {scores[0][0]}'s")
            diff = max(abs(t["logprob"] - r) for t, r in zip(s["tokens"], ref))
            ok = diff <= a.tolerance
            failed |= not ok and name not in a.info
            results.append({"what": f"score {name}", "tokens": len(ref), "max_abs_logprob_diff": diff, "ok": ok,
                            "judged": name not in a.info})
        for name, g in generates:
            want = g["token_ids"]
            seq = list(ids)
            agree, first_low_margin = 0, None
            for step in range(len(want)):
                top = model(torch.tensor([seq], device=device)).logits[0, -1].double().topk(2)
                margin = (top.values[0] - top.values[1]).item()
                if first_low_margin is None and margin < a.margin:
                    first_low_margin = step
                if top.indices[0].item() != want[step]:
                    break
                agree += 1
                seq.append(want[step])
            ok = agree == len(want) or (first_low_margin is not None and agree >= first_low_margin)
            failed |= not ok and name not in a.info
            results.append({"what": f"greedy {name}", "tokens": len(want), "equal_prefix": agree,
                            "first_low_margin_step": first_low_margin, "ok": ok,
                            "judged": name not in a.info})
    for r in results:
        print("hf_oracle:", json.dumps(r))
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"model": a.model, "device": device, "transformers_dtype": "float32", "results": results}, f,
                  indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
