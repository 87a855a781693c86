#!/usr/bin/python3
"""Reference values from PyTorch for train's CNN, ResNet and GPT, kept in testdata/.

    go build -o train . && /usr/bin/python3 scripts/torch_reference.py

For each model it asks train for the initial weights (`train init`, a
step-0 safetensors checkpoint), builds the PyTorch module the README
defines, loads them with load_state_dict(strict=True), runs one training-
mode forward and backward on a fixed batch in float64, and writes
testdata/reference/<model>.safetensors: the weights, the batch (x, labels),
the loss, the logits, every gradient (grad.<name>) and the BatchNorm running
statistics after the forward (after.<name>). trainer's TestPyTorchReference
compares train's float32 results with these. Needs Debian's python3-torch
(PyTorch 1.13 for the CPU); the outputs are committed, so the Go test runs
everywhere.
"""
import json
import os
import struct
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_gpt import DTYPES, GPT, read_safetensors  # the README's GPT-2 module, in its own file

OUT = "testdata/reference"


class CNN(nn.Module):
    """train --model cnn."""

    def __init__(self, in_ch=1, size=28, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * (size // 4) ** 2, 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """train --model resnet --depth D: He et al. 2016's CIFAR ResNet."""

    def __init__(self, depth=20, in_ch=3, classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_ch, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = self._stage(16, 16, n, 1)
        self.layer2 = self._stage(16, 32, n, 2)
        self.layer3 = self._stage(32, 64, n, 2)
        self.linear = nn.Linear(64, classes)

    @staticmethod
    def _stage(cin, cout, n, stride):
        blocks = [BasicBlock(cin, cout, stride)]
        blocks += [BasicBlock(cout, cout, 1) for _ in range(n - 1)]
        return nn.Sequential(*blocks)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


NAMES = {v: k for k, v in DTYPES.items()}


def write_safetensors(path, tensors, meta):
    header, offset, chunks = {}, 0, []
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        b = t.numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        chunks.append(b)
    header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def reference(name, module, init_args, x, labels):
    path = f"{OUT}/{name}-init.safetensors"
    subprocess.run(["./train", "init", *init_args, "-o", path], check=True)
    init, meta = read_safetensors(path)
    os.remove(path)
    module.load_state_dict(init, strict=True)
    module = module.double().train()
    logits = module(x.double())
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out = {f"init.{k}": v for k, v in init.items()}
    out["x"], out["labels"] = x, labels
    # Results computed in float64, stored in float32 (7 digits, ample for a
    # 1e-4 comparison) to keep the files small; the loss in float64.
    out["loss"] = loss.detach().reshape(1)
    out["logits"] = logits.detach().float()
    for k, p in module.named_parameters():
        out[f"grad.{k}"] = p.grad.detach().float()
    for k, b in module.named_buffers():
        out[f"after.{k}"] = b.detach() if b.dtype == torch.int64 else b.detach().float()
    write_safetensors(f"{OUT}/{name}.safetensors", out,
                      {"model": meta["model"], "torch": torch.__version__, "made_by": "scripts/torch_reference.py"})
    print(f"{name}: loss {loss.item():.6f}, {sum(p.numel() for p in module.parameters())} parameters")


def reference_gpt(g):
    """The GPT's reference: weights drawn here (train init is for the
    models train can train yet), wider than GPT-2's 0.02 so every path
    carries signal, a batch of 2 sequences of 16 tokens."""
    cfg = dict(layers=2, heads=2, dim=16, context=16, vocab=61, vocab_padded=64)
    module = GPT(**cfg)
    init = {}
    for k, p in module.named_parameters():
        if k.endswith("ln_1.weight") or k.endswith("ln_2.weight") or k.endswith("ln_f.weight"):
            v = 1 + 0.1 * torch.randn(p.shape, generator=g)
        else:
            v = 0.3 * torch.randn(p.shape, generator=g)
        init[k] = v.float()
    module.load_state_dict({**init, "lm_head.weight": init["transformer.wte.weight"]}, strict=True)
    module = module.double().train()
    x = torch.randint(0, cfg["vocab"], (2, cfg["context"]), generator=g)
    labels = torch.randint(0, cfg["vocab"], (2, cfg["context"]), generator=g)
    logits = module(x).reshape(-1, cfg["vocab"])
    loss = F.cross_entropy(logits, labels.reshape(-1))
    loss.backward()
    out = {f"init.{k}": v for k, v in init.items()}
    out["x"], out["labels"] = x, labels.reshape(-1)
    out["loss"] = loss.detach().reshape(1)
    out["logits"] = logits.detach().float()
    for k, p in module.named_parameters():
        out[f"grad.{k}"] = p.grad.detach().float()
    model = {"kind": "gpt", "hidden": None, "input": [0, 0, 0], "classes": cfg["vocab"], "gpt": cfg}
    write_safetensors(f"{OUT}/gpt.safetensors", out,
                      {"model": json.dumps(model), "torch": torch.__version__, "made_by": "scripts/torch_reference.py"})
    print(f"gpt: loss {loss.item():.6f}, {sum(p.numel() for p in module.parameters())} parameters")
    # The same weights as Hugging Face's GPT2Model saves GPT-2's published
    # ones (model.safetensors): names without "transformer.", the token
    # table with the real vocabulary's rows only, each block's causal-mask
    # buffers (attn.bias, attn.masked_bias), no lm_head. train --init-from
    # must read it into the padded table and get the loss above.
    hf = {k.removeprefix("transformer."): v for k, v in init.items()}
    hf["wte.weight"] = hf["wte.weight"][: cfg["vocab"]].clone()
    for i in range(cfg["layers"]):
        hf[f"h.{i}.attn.bias"] = torch.tril(torch.ones(cfg["context"], cfg["context"])).view(1, 1, cfg["context"], cfg["context"])
        hf[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    write_safetensors(f"{OUT}/gpt-hf.safetensors", hf, {"format": "pt", "made_by": "scripts/torch_reference.py"})


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(2026)
    # A batch of 8: the CNN on 1x12x12 (every layer as at 28x28, a smaller
    # fc1), ResNet-8 on 3x16x16 (three channels: the layout change matters).
    x1 = torch.randn(8, 1, 12, 12, generator=g)
    y1 = torch.randint(0, 10, (8,), generator=g)
    reference("cnn", CNN(1, 12, 10), ["--model", "cnn", "--data", "synthetic", "--synthetic-shape", "1x12x12", "--seed", "3"], x1, y1)
    x2 = torch.randn(8, 3, 16, 16, generator=g)
    y2 = torch.randint(0, 10, (8,), generator=g)
    reference("resnet8", ResNet(8, 3, 10), ["--model", "resnet", "--depth", "8", "--data", "synthetic", "--synthetic-shape", "3x16x16", "--seed", "4"], x2, y2)
    reference_gpt(g)


if __name__ == "__main__":
    sys.exit(main())
