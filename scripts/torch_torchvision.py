#!/usr/bin/python3
"""torchvision's own ResNet on train's weights: the reference for --model resnet at 18 to 152.

    /usr/bin/python3 scripts/torch_torchvision.py INIT.safetensors OUT.safetensors [BATCH]

INIT is what `train init --model resnet --depth D` writes (a step-0
checkpoint; its "model" metadata gives the depth, the input shape and the
classes). This builds torchvision.models.resnetD(num_classes=...) - the
reference is torchvision's module itself, not a copy of ours - and loads
INIT with load_state_dict(strict=True) (the "optimizer." tensors left
out): every name, shape and buffer must be torchvision's. Then, in
float64, on a seeded random batch: one training-mode forward and backward
with cross-entropy, and an evaluation-mode forward after it (which uses
the running statistics the training forward updated). OUT holds x, labels,
the loss, the logits, every gradient (grad.<name>), the BatchNorm buffers
after the training forward (after.<name>) and the evaluation logits
(eval.logits), in float32 (the loss in float64). The e2e test
TestTorchvisionResNet compares train's float32 results with them.
Needs Debian's python3-torch and python3-torchvision.
"""
import sys

import torch
import torch.nn.functional as F
import torchvision

from torch_gpt import read_safetensors
from torch_reference import write_safetensors

import json


def main():
    init_path, out_path = sys.argv[1], sys.argv[2]
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    init, meta = read_safetensors(init_path)
    cfg = json.loads(meta["model"])
    assert cfg["kind"] == "resnet", cfg
    c, h, w = cfg["input"]
    module = getattr(torchvision.models, f"resnet{cfg['depth']}")(num_classes=cfg["classes"])
    state = {k: v for k, v in init.items() if not k.startswith("optimizer.")}
    module.load_state_dict(state, strict=True)
    module = module.double().train()
    g = torch.Generator().manual_seed(20261124)
    x = torch.randn(batch, c, h, w, generator=g)
    labels = torch.randint(0, cfg["classes"], (batch,), generator=g)
    logits = module(x.double())
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out = {"x": x, "labels": labels, "loss": loss.detach().reshape(1), "logits": logits.detach().float()}
    for name, p in module.named_parameters():
        out[f"grad.{name}"] = p.grad.float()
    for name, b in module.named_buffers():
        out[f"after.{name}"] = b if b.dtype == torch.int64 else b.float()
    module.eval()
    with torch.no_grad():
        out["eval.logits"] = module(x.double()).float()
    write_safetensors(out_path, out, {"model": meta["model"], "torchvision": torchvision.__version__})
    print(json.dumps({"loss": loss.item(), "parameters": sum(p.numel() for p in module.parameters())}))


if __name__ == "__main__":
    main()
