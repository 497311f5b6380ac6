"""The reference side of tests/io/test_safetensors.cpp: Hugging Face's `safetensors` package
(pinned in requirements/test.txt) writes the files astraflow must read, and reads back the files
astraflow writes.

  safetensors_reference.py write FILE          random tensors of every dtype, with metadata
  safetensors_reference.py compare A B         same names, dtypes, shapes, values, metadata
  safetensors_reference.py sharded DIR FILE    DIR's index + shards hold exactly FILE's tensors
Exit status 0 when the check holds; a message on stderr when it does not.
"""
import json
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def fail(message):
    print(f"safetensors_reference: {message}", file=sys.stderr)
    sys.exit(1)


def write(path):
    g = torch.Generator().manual_seed(7)
    tensors = {
        "iota": torch.arange(10, dtype=torch.float32),
        "model.layers.0.self_attn.q_proj.weight": torch.randn(3, 5, generator=g),
        "half": torch.randn(7, generator=g).to(torch.float16),
        "brain": torch.randn(2, 3, 4, generator=g).to(torch.bfloat16),
        "double_scalar": torch.tensor(2.5, dtype=torch.float64),
        "ids": torch.tensor([-3, 0, 1 << 40, 7], dtype=torch.int64),
        "i32": torch.tensor([[1, -2], [3, -4]], dtype=torch.int32),
        "i16": torch.tensor([-7, 9], dtype=torch.int16),
        "i8": torch.tensor([-1, 2, -3], dtype=torch.int8),
        "bytes": torch.tensor([0, 255, 128], dtype=torch.uint8),
        "flags": torch.tensor([True, False, True]),
        "empty": torch.zeros(0, 4),
    }
    save_file(tensors, path, metadata={"format": "pt", "note": "written by safetensors " + _version()})


def _version():
    import safetensors

    return safetensors.__version__


def metadata(path):
    with safe_open(path, framework="pt") as f:
        return f.metadata() or {}


def same(a, b, where):
    if a.keys() != b.keys():
        fail(f"{where}: tensor names differ: {sorted(a.keys() ^ b.keys())}")
    for name in a:
        x, y = a[name], b[name]
        if x.dtype != y.dtype or x.shape != y.shape:
            fail(f"{where}: '{name}' is {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
        if not torch.equal(x, y):
            fail(f"{where}: '{name}' values differ")


def compare(a_path, b_path):
    same(load_file(a_path), load_file(b_path), f"{a_path} vs {b_path}")
    ma, mb = metadata(a_path), metadata(b_path)
    if ma != mb:
        fail(f"metadata differ: {ma} vs {mb}")


def sharded(folder, file_path):
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        index = json.load(f)
    merged = {}
    for shard in sorted(set(index["weight_map"].values())):
        part = load_file(os.path.join(folder, shard))
        for name in part:
            if index["weight_map"].get(name) != shard:
                fail(f"'{name}' is in {shard}, the index says {index['weight_map'].get(name)}")
        merged.update(part)
    reference = load_file(file_path)
    same(reference, merged, f"{folder} vs {file_path}")
    total = sum(t.numel() * t.element_size() for t in reference.values())
    if index["metadata"]["total_size"] != total:
        fail(f"metadata.total_size {index['metadata']['total_size']} != {total}")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"write": write, "compare": compare, "sharded": sharded}[command](*args)
