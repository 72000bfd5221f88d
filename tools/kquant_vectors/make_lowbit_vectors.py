#!/usr/bin/env python3
"""Reference vectors for the Q2_K / Q3_K conversion at load (tests/data/gguf_quants, read by
tests/unit/gguf/gguf_quants_test.cpp).

llama.cpp is the reference: llama-quantize writes the blocks, gguf-py dequantizes them. Neither is
part of specd; this script only records what they produce, so the test needs neither.

  1. specd-to-gguf --model M --out f16.gguf --type f16 --layers 2   (M: tinyllama's fixture shape)
  2. llama-quantize f16.gguf q2k.gguf Q2_K; llama-quantize f16.gguf q3ks.gguf Q3_K_S
  3. /usr/bin/python3 tools/kquant_vectors/make_lowbit_vectors.py --gguf-py LLAMA_CPP/gguf-py \
        --q2k q2k.gguf --q3k q3ks.gguf --out tests/data/gguf_quants

For each type it takes the first ROWS rows of blk.0.attn_k.weight (Q2_K in the Q2_K file, Q3_K in
the Q3_K_S file) and writes <type>.blocks (llama.cpp's blocks), <type>.dequant.f32 (gguf-py's
dequantization, little-endian f32) and <type>.shape (rows, cols).
"""
import argparse
import os
import sys

ROWS = 2
TENSOR = "blk.0.attn_k.weight"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--q2k", required=True)
    ap.add_argument("--q3k", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf  # noqa: E402
    import numpy as np  # noqa: E402

    os.makedirs(a.out, exist_ok=True)
    for name, path, qtype in (("q2_k", a.q2k, "Q2_K"), ("q3_k", a.q3k, "Q3_K")):
        t = next(t for t in gguf.GGUFReader(path).tensors if t.name == TENSOR)
        if t.tensor_type.name != qtype:
            sys.exit(f"{path}: {TENSOR} is {t.tensor_type.name}, expected {qtype}")
        blocks = np.asarray(t.data)[:ROWS]
        cols = int(t.shape[0])
        values = gguf.quants.dequantize(blocks, t.tensor_type).astype("<f4")
        blocks.tofile(os.path.join(a.out, f"{name}.blocks"))
        values.tofile(os.path.join(a.out, f"{name}.dequant.f32"))
        with open(os.path.join(a.out, f"{name}.shape"), "w") as f:
            f.write(f"{ROWS} {cols}\n")
        print(f"{name}: {ROWS} x {cols}")


if __name__ == "__main__":
    main()
