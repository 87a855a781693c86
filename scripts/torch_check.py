#!/usr/bin/python3
"""Load a train checkpoint into PyTorch and evaluate it on Fashion-MNIST.

    /usr/bin/python3 scripts/torch_check.py CHECKPOINT [DATA_DIR]

Builds the PyTorch module the README defines from the checkpoint's "model"
metadata, loads the parameters with load_state_dict(strict=True) (the
"optimizer." tensors filtered out), and prints the test set's mean
cross-entropy and accuracy as JSON, normalising pixels as train does. It
reads safetensors with the standard library alone (Debian 12 has no
python3-safetensors): 8 bytes of header length, a JSON header, the data.
Needs Debian's python3-torch.
"""
import gzip
import json
import struct
import sys

import torch
import torch.nn as nn


class MLP(nn.Module):
    """train's --model mlp: Linear layers with ReLU between them."""

    def __init__(self, sizes=(784, 256, 10)):
        super().__init__()
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x.flatten(1))


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n :]
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (name, info["dtype"])
        lo, hi = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[lo:hi]), dtype=torch.float32)
        tensors[name] = t.reshape(info["shape"])
    return tensors, meta


def read_idx(path):
    with gzip.open(path, "rb") as f:
        blob = f.read()
    nd = blob[3]
    dims = struct.unpack(">" + "I" * nd, blob[4 : 4 + 4 * nd])
    return torch.frombuffer(bytearray(blob[4 + 4 * nd :]), dtype=torch.uint8).reshape(dims)


def main():
    path = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
    tensors, meta = read_safetensors(path)
    cfg = json.loads(meta["model"])
    assert cfg["kind"] == "mlp", cfg
    c, h, w = cfg["input"]
    model = MLP([c * h * w] + list(cfg["hidden"] or []) + [cfg["classes"]])
    state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    model.load_state_dict(state, strict=True)
    model.eval()
    x = read_idx(f"{data}/t10k-images-idx3-ubyte.gz").float() / 255
    x = (x - 0.2860) / 0.3530
    y = read_idx(f"{data}/t10k-labels-idx1-ubyte.gz").long()
    with torch.no_grad():
        logits = model(x.unsqueeze(1))
        loss = nn.functional.cross_entropy(logits.double(), y).item()
        acc = (logits.argmax(1) == y).double().mean().item()
    print(json.dumps({"step": int(meta["step"]), "loss": loss, "accuracy": 100 * acc}))


if __name__ == "__main__":
    main()
