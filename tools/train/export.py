"""Writes a trained model as a Hugging Face model directory: model.safetensors (BF16), config.json,
generation_config.json, tokenizer.json and tokenizer_config.json.

safetensors: [u64 little-endian header length][JSON header][data]; the header maps each tensor
name to {"dtype", "shape", "data_offsets"} and is padded with spaces to a multiple of 8 bytes.
Tensors are written in name order, so the file is a function of the weights alone.
"""

import json
import os
import shutil
import struct

import torch


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: torch tensor}; every tensor is stored as BF16 (round to nearest even)."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.bfloat16).contiguous()
        data = t.view(torch.int16).numpy().astype("<i2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def bf16_round(model):
    """Rounds every parameter to BF16 in place (what the checkpoint will hold), so that
    evaluation in torch sees the weights specd will load."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def write_model_dir(directory, model, tokenizer_dir, bos_id, eos_id, metadata=None):
    os.makedirs(directory, exist_ok=True)
    tensors = dict(model.state_dict())
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors, metadata)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(model.s.to_config(bos_id, eos_id), f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos_id, "eos_token_id": eos_id, "do_sample": False}, f, indent=2)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.abspath(tokenizer_dir) != os.path.abspath(directory):
            shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(directory, name))
