#!/usr/bin/env python3
"""Reference vectors for specd's K-quants (tests/data/kquants, read by tests/kernels/test_kquants.cpp).

llama.cpp is the reference: its quantizer writes the blocks, its gguf-py dequantizes them. Neither is
part of specd; this script only records what they produce, so the test needs neither.

  1. specd-to-gguf --model M --out f16.gguf --type f16           (M: llama-68m's fixture shape)
  2. llama-quantize f16.gguf q4km.gguf Q4_K_M; llama-quantize f16.gguf q5km.gguf Q5_K_M;
     llama-quantize f16.gguf q3km.gguf Q3_K_M; llama-quantize f16.gguf q2k.gguf Q2_K
  3. /usr/bin/python3 tools/kquant_vectors/make_vectors.py --gguf-py LLAMA_CPP/gguf-py \
        --f16 f16.gguf --q4km q4km.gguf --q5km q5km.gguf --q3km q3km.gguf --q2k q2k.gguf \
        --out tests/data/kquants

For each type (Q4_K from blk.0.ffn_gate of the Q4_K_M file, Q5_K from the same tensor of the
Q5_K_M file, Q6_K from blk.1.ffn_down of the Q4_K_M file, Q3_K from blk.0.ffn_gate of the
Q3_K_M file, Q2_K from the same tensor of the Q2_K file) whose file is given it writes the first ROWS rows as
  <type>.src.f16       the f16 values llama-quantize read (little-endian u16)
  <type>.blocks        llama.cpp's blocks of those rows
  <type>.dequant.f32   gguf-py's dequantization of those blocks (little-endian f32)
and <type>.shape (rows, cols).
"""
import argparse
import os
import sys

ROWS = 4
PICKS = [("q4_k", "q4km", "blk.0.ffn_gate.weight", "Q4_K"),
         ("q5_k", "q5km", "blk.0.ffn_gate.weight", "Q5_K"),
         ("q6_k", "q4km", "blk.1.ffn_down.weight", "Q6_K"),
         ("q3_k", "q3km", "blk.0.ffn_gate.weight", "Q3_K"),
         ("q2_k", "q2k", "blk.0.ffn_gate.weight", "Q2_K")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--f16", required=True)
    ap.add_argument("--q4km")
    ap.add_argument("--q5km")
    ap.add_argument("--q3km")
    ap.add_argument("--q2k")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf  # noqa: E402
    import numpy as np  # noqa: E402

    def tensor(path, name):
        for t in gguf.GGUFReader(path).tensors:
            if t.name == name:
                return t
        raise SystemExit(f"{path}: no tensor {name}")

    files = {"q4km": a.q4km, "q5km": a.q5km, "q3km": a.q3km, "q2k": a.q2k}
    os.makedirs(a.out, exist_ok=True)
    for label, which, name, type_name in PICKS:
        if files[which] is None:
            continue
        q = tensor(files[which], name)
        assert q.tensor_type.name == type_name, (name, q.tensor_type.name)
        src = tensor(a.f16, name)
        assert src.tensor_type.name == "F16"
        cols = int(src.shape[0])
        rows = np.ascontiguousarray(np.asarray(src.data)[:ROWS]).view("<u2")
        blocks = np.asarray(q.data)[:ROWS]
        deq = gguf.quants.dequantize(blocks, q.tensor_type).astype("<f4")
        assert deq.shape == (ROWS, cols), deq.shape
        rows.tofile(os.path.join(a.out, f"{label}.src.f16"))
        blocks.tofile(os.path.join(a.out, f"{label}.blocks"))
        deq.tofile(os.path.join(a.out, f"{label}.dequant.f32"))
        with open(os.path.join(a.out, f"{label}.shape"), "w") as f:
            f.write(f"{ROWS} {cols}\n")
        print(label, name, type_name, ROWS, "x", cols)


if __name__ == "__main__":
    main()
