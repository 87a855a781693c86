#!/usr/bin/env python3
"""PyTorch on one GPU, as the yardstick for `train`'s own speed and accuracy.

Builds exactly the networks `train --model cnn|resnet` builds (README.md,
"Models"; model/model.go) for Fashion-MNIST (1x28x28, 10 classes) and trains
them the way `train` does, so the figures compare like with like:

  --bench          training throughput on a synthetic batch kept on the GPU,
                   eager and torch.compile, one parseable line per setup:
      python3 scripts/bench/torch_gpu.py --bench --models resnet,cnn --batch 512
  --time-to-acc A  real Fashion-MNIST (IDX files, raw or .gz), whole data set
                   on the GPU, augmented on the GPU per batch like data/augment.go,
                   test accuracy after every epoch, and the first epoch that
                   reaches A:
      python3 scripts/bench/torch_gpu.py --time-to-acc 0.93 --model resnet \\
          --data /path/to/fashion-mnist --epochs 30 --batch 512

Mirrored from our code: normalisation (p/255 - 0.2860) / 0.3530 (data/mnist.go,
data/dataset.go); random crop after zero padding by --pad pixels (default 4,
flags.go --crop-pad) and a flip with probability 1/2, the padding being pixel
value 0 normalised like any other (data/augment.go); a new permutation each
epoch with the last N mod batch samples dropped (data/sampler.go); SGD with
L2 weight decay on every parameter (optim/sgd.go); per-step cosine decay to
zero at epochs * steps_per_epoch after an optional linear warm-up
(optim/schedule.go, trainer/run.go). `--device cpu` runs a smoke test.
"""
import argparse
import contextlib
import gzip
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

FASHION_MEAN, FASHION_STD = 0.2860, 0.3530  # data/mnist.go
IN_CH, SIZE, CLASSES = 1, 28, 10


# The modules the README defines (train's cnn and resnet), shared with the
# reference-value script.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_reference import CNN, ResNet  # noqa: E402


def build(name, depth, dev):
    if name == "cnn":
        return CNN(IN_CH, SIZE, CLASSES).to(dev)
    if name == "resnet":
        if depth < 8 or (depth - 2) % 6:
            sys.exit(f"--depth {depth}: a CIFAR ResNet has depth 6n+2")
        return ResNet(depth, IN_CH, CLASSES).to(dev)
    sys.exit(f"unknown model {name!r}: cnn or resnet")


def autocast(precision, dev):
    return torch.autocast(dev.type, dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def sgd(model, a):  # optim/sgd.go: torch.optim.SGD, dampening 0, decay on every parameter
    return torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.wd)


def train_step(fn, opt, x, y, precision, dev):
    with autocast(precision, dev):
        loss = F.cross_entropy(fn(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def first_line(e):
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0] if s else ''}"


def bench(a, dev):
    for name in a.models.split(","):
        for mode in a.modes.split(","):
            tag = f"torch model={name} mode={mode} precision={a.precision} batch={a.batch}"
            if dev.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            torch.manual_seed(a.seed)
            model = build(name, a.depth, dev).train()
            opt = sgd(model, a)
            x = torch.randn(a.batch, IN_CH, SIZE, SIZE, device=dev)
            y = torch.randint(0, CLASSES, (a.batch,), device=dev)
            try:
                fn = torch.compile(model) if mode == "compile" else model
                for _ in range(a.warmup):  # compilation and cuDNN autotuning happen here
                    train_step(fn, opt, x, y, a.precision, dev)
                sync(dev)
            except Exception as e:  # noqa: BLE001: report any compile failure and go on
                if mode != "compile":
                    raise
                print(f"{tag} compile failed: {first_line(e)}", flush=True)
                continue
            t0 = time.perf_counter()
            for _ in range(a.steps):
                train_step(fn, opt, x, y, a.precision, dev)
            sync(dev)
            dt = time.perf_counter() - t0
            mem = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else 0
            print(f"{tag} samples_per_s={a.steps * a.batch / dt:.1f} ms_per_step={1000 * dt / a.steps:.2f} "
                  f"peak_mem_mib={mem:.0f}", flush=True)
            del fn, model, opt, x, y


def read_idx(path):
    """An IDX file of unsigned bytes (data/idx.go), raw or gzipped, as a uint8 tensor."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        buf = f.read()
    zero, kind, ndim = struct.unpack(">HBB", buf[:4])
    if zero != 0 or kind != 0x08:
        sys.exit(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(f">{ndim}I", buf[4:4 + 4 * ndim])
    body = bytearray(buf[4 + 4 * ndim:])
    if len(body) != math.prod(dims):
        sys.exit(f"{path}: header says {dims}, body has {len(body)} bytes")
    return torch.frombuffer(body, dtype=torch.uint8).reshape(dims)


def load_split(d, prefix):
    def find(name):  # data/mnist.go findFile: name.gz, else name
        for p in (os.path.join(d, name + ".gz"), os.path.join(d, name)):
            if os.path.exists(p):
                return p
        sys.exit(f"--data {d}: no {name}[.gz]")
    x = read_idx(find(f"{prefix}-images-idx3-ubyte")).unsqueeze(1)  # N,1,28,28
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte")).long()
    return x, y


def normalise(x):  # data/dataset.go: (p/255 - mean) / std, in float32
    return (x.float() / 255 - FASHION_MEAN) / FASHION_STD


def augment(x, pad, flip, gen):
    """data/augment.go on a uint8 batch (B,C,H,W): crop at a random offset in
    [-pad, pad] of the zero-padded image, then mirror with probability 1/2."""
    B, C, H, W = x.shape
    dev = x.device
    oy = ox = torch.zeros(B, dtype=torch.long, device=dev)
    if pad > 0:
        x = F.pad(x, (pad, pad, pad, pad))  # pixel value 0
        oy = torch.randint(0, 2 * pad + 1, (B,), device=dev, generator=gen)
        ox = torch.randint(0, 2 * pad + 1, (B,), device=dev, generator=gen)
    rows = oy[:, None] + torch.arange(H, device=dev)  # B,H
    cols = ox[:, None] + torch.arange(W, device=dev)  # B,W
    if flip:  # out[c] = src[W-1-c+dx]: the crop's columns reversed
        f = torch.rand(B, device=dev, generator=gen) < 0.5
        cols = torch.where(f[:, None], cols.flip(1), cols)
    b = torch.arange(B, device=dev)[:, None, None]
    out = x.permute(0, 2, 3, 1)[b, rows[:, :, None], cols[:, None, :]]  # B,H,W,C
    return out.permute(0, 3, 1, 2).contiguous()


def lr_at(step, base, warmup, total):  # optim/schedule.go Schedule.At, kind cosine
    if step < warmup:
        return base * (step + 1) / warmup
    if total <= warmup:
        return base
    t = min((step - warmup) / (total - warmup), 1.0)
    return base * 0.5 * (1 + math.cos(math.pi * t))


def evaluate(fn, model, x, y, a, dev):
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=dev)
    with torch.no_grad(), autocast(a.precision, dev):
        for i in range(0, len(x), a.eval_batch):
            correct += (fn(x[i:i + a.eval_batch]).argmax(1) == y[i:i + a.eval_batch]).sum()
    model.train()
    return correct.item() / len(x)


def time_to_acc(a, dev):
    t_load = time.perf_counter()
    xtr, ytr = (t.to(dev) for t in load_split(a.data, "train"))
    xte, yte = (t.to(dev) for t in load_split(a.data, "t10k"))
    if a.train_limit:
        xtr, ytr = xtr[:a.train_limit], ytr[:a.train_limit]
    if a.test_limit:
        xte, yte = xte[:a.test_limit], yte[:a.test_limit]
    xte = normalise(xte)  # no augmentation at test time
    sync(dev)
    n, b = len(xtr), a.batch
    spe = n // b  # data/sampler.go: the last n mod b samples of each epoch are dropped
    if spe == 0:
        sys.exit(f"--batch {b}: more than the {n} training samples")
    total = a.epochs * spe
    pad, flip = (0, False) if a.no_augment else (a.pad, True)
    print(f"# data: {n} train, {len(xte)} test on {dev} in {time.perf_counter() - t_load:.1f}s; model={a.model} "
          f"mode={a.mode} precision={a.precision} batch={b} steps_per_epoch={spe} lr={a.lr} wd={a.wd} "
          f"momentum={a.momentum} schedule=cosine-per-step warmup_steps={a.warmup_steps} pad={pad} flip={flip}",
          flush=True)
    torch.manual_seed(a.seed)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)
    model = build(a.model, a.depth, dev).train()
    try:
        fn = torch.compile(model) if a.mode == "compile" else model
    except Exception as e:  # noqa: BLE001 (errors inside the first step still raise)
        sys.exit(f"torch compile failed: {first_line(e)}")
    opt = sgd(model, a)
    step, train_s, reached = 0, 0.0, False
    wall0 = time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        sync(dev)
        t0 = time.perf_counter()
        perm = torch.randperm(n, device=dev, generator=gen)
        loss_sum = torch.zeros((), device=dev)
        for k in range(spe):
            idx = perm[k * b:(k + 1) * b]
            xb = normalise(augment(xtr[idx], pad, flip, gen))
            for g in opt.param_groups:
                g["lr"] = lr_at(step, a.lr, a.warmup_steps, total)
            loss_sum += train_step(fn, opt, xb, ytr[idx], a.precision, dev).float()
            step += 1
        sync(dev)
        train_s += time.perf_counter() - t0
        acc = evaluate(fn, model, xte, yte, a, dev)
        wall = time.perf_counter() - wall0
        print(f"torch epoch={epoch} train_loss={loss_sum.item() / spe:.4f} test_acc={acc:.4f} "
              f"elapsed_s={train_s:.1f} wall_s={wall:.1f}", flush=True)
        if not reached and acc >= a.time_to_acc:
            reached = True
            print(f"torch time_to_acc target={a.time_to_acc} epoch={epoch} train_s={train_s:.1f} wall_s={wall:.1f}",
                  flush=True)
    if not reached:
        print(f"torch time_to_acc target={a.time_to_acc} not reached in {a.epochs} epochs", flush=True)
    print(f"torch final test_acc={acc:.4f} train_s={train_s:.1f} wall_s={time.perf_counter() - wall0:.1f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--bench", action="store_true", help="throughput on a synthetic batch")
    what.add_argument("--time-to-acc", type=float, metavar="ACC", help="train on Fashion-MNIST to this test accuracy")
    p.add_argument("--models", default="cnn,resnet", help="--bench: comma-separated cnn,resnet")
    p.add_argument("--modes", default="eager,compile", help="--bench: comma-separated eager,compile")
    p.add_argument("--model", default="resnet", choices=["cnn", "resnet"], help="--time-to-acc: the model")
    p.add_argument("--mode", default="eager", choices=["eager", "compile"], help="--time-to-acc: eager or compile")
    p.add_argument("--depth", type=int, default=20, help="ResNet depth, 6n+2")
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--warmup", type=int, default=20, help="--bench: untimed steps")
    p.add_argument("--steps", type=int, default=100, help="--bench: timed steps")
    p.add_argument("--data", help="--time-to-acc: directory of Fashion-MNIST IDX files (raw or .gz)")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=5e-4, help="L2 weight decay on every parameter")
    p.add_argument("--warmup-steps", type=int, default=0, help="linear learning-rate warm-up (train --warmup-steps)")
    p.add_argument("--pad", type=int, default=4, help="random crop after zero padding by this much (train --crop-pad)")
    p.add_argument("--no-augment", action="store_true", help="no crop and no flip (train --augment none)")
    p.add_argument("--eval-batch", type=int, default=1000)
    p.add_argument("--train-limit", type=int, default=0, help="smoke tests: first N training images only")
    p.add_argument("--test-limit", type=int, default=0, help="smoke tests: first N test images only")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test")
    a = p.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("torch_gpu.py: CUDA is not available (use --device cpu for a smoke test)", file=sys.stderr)
        sys.exit(2)
    if a.time_to_acc is not None and not a.data:
        p.error("--time-to-acc needs --data")
    name = "cpu"
    if dev.type == "cuda":  # fp32 and bf16: no TF32 (autocast covers bf16's convolutions and matmuls)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.benchmark = True
        name = torch.cuda.get_device_name(dev)
        print(f"# cudnn.benchmark={torch.backends.cudnn.benchmark} tf32 matmul={torch.backends.cuda.matmul.allow_tf32} "
              f"cudnn={torch.backends.cudnn.allow_tf32}", flush=True)
    print(f"# torch {torch.__version__} on {name}, precision={a.precision} seed={a.seed}", flush=True)
    if a.bench:
        bench(a, dev)
    else:
        time_to_acc(a, dev)


if __name__ == "__main__":
    main()
