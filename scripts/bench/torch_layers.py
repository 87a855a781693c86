#!/usr/bin/python3
"""PyTorch's time for each convolution shape of ResNet-20 (batch 64 of
1x28x28), forward and backward (input and weight gradients) apart, one
thread unless --threads: the per-layer peer of `train bench step --model
resnet --depth 20 --bn local --threads 1 --passes`, whose t_wino (units 16,
8, 2: the 28x28x16, 14x14x32 and 7x7x64 layers), t_wino_dw, t_wino_weights
and t_conv_* (the stride-2 and 1x1 convolutions) rows it is set beside.
ResNet-20 has 6, 5 and 5 of the three stride-1 shapes and one of each
other. Run it under jemalloc as cpu-vs-torch.sh does:

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \\
        MALLOC_CONF=retain:true,dirty_decay_ms:-1,muzzy_decay_ms:-1 \\
        /usr/bin/python3 scripts/bench/torch_layers.py
"""
import argparse
import time

import torch
import torch.nn as nn

SHAPES = [("3x3 16 28x28", 16, 16, 28, 3, 1, 1), ("3x3 32 14x14", 32, 32, 14, 3, 1, 1), ("3x3 64 7x7", 64, 64, 7, 3, 1, 1),
          ("3x3 s2 16->32", 16, 32, 28, 3, 2, 1), ("3x3 s2 32->64", 32, 64, 14, 3, 2, 1),
          ("1x1 s2 16->32", 16, 32, 28, 1, 2, 0), ("1x1 s2 32->64", 32, 64, 14, 1, 2, 0)]


def bench(conv, x, steps):
    x = x.clone().requires_grad_(True)
    for _ in range(5):
        y = conv(x)
        y.backward(torch.ones_like(y))
    fw = bw = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        y = conv(x)
        t1 = time.perf_counter()
        g = torch.ones_like(y)
        t2 = time.perf_counter()
        y.backward(g)
        fw, bw = fw + t1 - t0, bw + time.perf_counter() - t2
    return fw / steps * 1e3, bw / steps * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name, c, o, h, k, s, p in SHAPES:
        f, b = bench(nn.Conv2d(c, o, k, s, p, bias=False), torch.randn(args.batch_size, c, h, h), args.steps)
        print(f"{name:16s} fwd {f:6.2f} ms  bwd {b:6.2f} ms  total {f + b:6.2f}")


if __name__ == "__main__":
    main()
