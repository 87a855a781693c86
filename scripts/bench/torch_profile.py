#!/usr/bin/python3
"""PyTorch's ResNet-20 training step (scripts/torch_reference.py's module,
batch 64 of random 1x28x28, SGD with momentum 0.9), timed over 40 steps
after 15 of warm-up at THREADS threads, then 10 steps under torch.profiler:
the convolutions' and BatchNorms' self time a step by input shape (the
profiler's own cost inflates them). The one-thread peer of `train bench
step --model resnet --depth 20 --bn local --threads 1 --passes`. Under
jemalloc as cpu-vs-torch.sh runs it:

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \\
        MALLOC_CONF=retain:true,dirty_decay_ms:-1,muzzy_decay_ms:-1 \\
        /usr/bin/python3 scripts/bench/torch_profile.py 1
"""
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_reference import ResNet  # noqa: E402

OPS = ("aten::mkldnn_convolution", "aten::convolution_backward", "aten::native_batch_norm", "aten::native_batch_norm_backward")


def main():
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    torch.manual_seed(0)
    m = ResNet(20, in_ch=1)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x), y).backward()
        opt.step()

    for _ in range(15):
        step()
    t = time.perf_counter()
    for _ in range(40):
        step()
    dt = (time.perf_counter() - t) / 40
    print(f"{dt * 1e3:.2f} ms/step, {64 / dt:.1f} samples/s")
    n = 10
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(n):
            step()
    rows = [(e.self_cpu_time_total / n / 1e3, e.key, e.count // n, str(e.input_shapes[:2]))
            for e in prof.key_averages(group_by_input_shape=True) if e.key in OPS]
    for r in sorted(rows, reverse=True):
        print("%7.2f ms/step  %-34s x%-3d %s" % r)


if __name__ == "__main__":
    main()
