#!/usr/bin/python3
"""PyTorch's training step for train's MLP and ResNet, for speed comparisons.

    mpirun -np N /usr/bin/python3 scripts/torch_bench.py --model resnet --depth 20 --batch-size 64 --threads 1
    mpirun -np N /usr/bin/python3 scripts/torch_bench.py --model resnet50 --data DIR --batch-size 8 --workers 1 --steps 6

The same modules as scripts/torch_reference.py (the README's), on random
1x28x28 inputs (train bench step's synthetic data) with SGD, momentum 0.9,
batch --batch-size per rank; at N > 1 as N DistributedDataParallel
processes over gloo (BatchNorm per rank, as DDP without SyncBatchNorm:
train runs with --bn local to match). Prints one JSON line: samples/s over
the timed steps and the largest rank's peak RSS.

--model resnet50 is torchvision's, trained on DIR/train (ImageFolder)
through RandomResizedCrop(224), RandomHorizontalFlip, ToTensor and
Normalize, with a DistributedSampler and --workers DataLoader processes
per rank: the peer of `train --model resnet --depth 50` on an image folder
(scripts/bench/resnet50-vs-torch.sh). Needs python3-torchvision too.
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import ResNet  # noqa: E402
from torch_gpt import world  # noqa: E402


def mlp(hidden):
    sizes = [784] + hidden + [10]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(nn.Flatten(), *layers)


class image_batches:
    """Endless batches of DIR/train through torchvision's ImageNet training
    transforms, this rank's share (a DistributedSampler)."""

    def __init__(self, args, rank, size):
        import torchvision
        import torchvision.transforms as T
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
        ds = torchvision.datasets.ImageFolder(os.path.join(args.data, "train"), transform=tf)
        sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=size, rank=rank) if size > 1 else None
        self.loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, sampler=sampler, shuffle=sampler is None,
                                                  num_workers=args.workers, drop_last=True, persistent_workers=args.workers > 0)
        self.classes, self.it = len(ds.classes), iter(self.loader)

    def __next__(self):
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["mlp", "resnet", "resnet50"], required=True)
    ap.add_argument("--data", help="resnet50: an image folder with train/")
    ap.add_argument("--workers", type=int, default=1, help="resnet50: DataLoader processes per rank")
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--hidden", default="256")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rank, size = world()
    torch.manual_seed(1)
    batches = None
    if args.model == "resnet50":
        import torchvision
        batches = image_batches(args, rank, size)
        model = torchvision.models.resnet50(num_classes=batches.classes)
    elif args.model == "resnet":
        model = ResNet(args.depth, in_ch=1)
    else:
        model = mlp([int(h) for h in args.hidden.split(",")])
    ddp = nn.parallel.DistributedDataParallel(model) if size > 1 else model
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    g = torch.Generator().manual_seed(rank + 1)
    x = torch.randn(args.batch_size, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (args.batch_size,), generator=g)

    def steps(n):
        nonlocal x, y
        for _ in range(n):
            if batches is not None:
                x, y = next(batches)
            loss = F.cross_entropy(ddp(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    steps(args.warmup)
    if size > 1:
        dist.barrier()
    t0 = time.time()
    steps(args.steps)
    if size > 1:
        dist.barrier()
    el = time.time() - t0
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    if size > 1:
        dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"ranks": size, "batch_per_rank": args.batch_size, "threads": args.threads, "steps": args.steps,
                          "samples_per_s": args.steps * args.batch_size * size / el, "peak_rss_mib": rss.item(),
                          "torch": torch.__version__}))


if __name__ == "__main__":
    main()
