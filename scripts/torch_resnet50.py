#!/usr/bin/python3
"""PyTorch's side of scripts/bench/resnet50-vs-torch.sh: torchvision's
ResNet-50 trained on an image folder with torchvision's ImageNet
training transforms, for speed comparisons with train on the same files.

    mpirun -np N /usr/bin/python3 scripts/torch_resnet50.py DIR [--batch-size 8] [--workers 1] [--steps 6]

DIR/train through ImageFolder, RandomResizedCrop(224), RandomHorizontalFlip,
ToTensor, Normalize; a DistributedSampler and --workers DataLoader
processes per rank; SGD with momentum 0.9; at N > 1 DistributedDataParallel
over gloo (BatchNorm per rank, DDP's default). Two warm-up steps, then
--steps timed ones. Prints one JSON line: samples/s and the largest rank's
peak RSS.
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
import torchvision
import torchvision.transforms as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import world  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rank, size = world()
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(os.path.join(args.dir, "train"), transform=tf)
    sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=size, rank=rank) if size > 1 else None
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, sampler=sampler, shuffle=sampler is None,
                                     num_workers=args.workers, drop_last=True, persistent_workers=args.workers > 0)
    torch.manual_seed(1)
    model = torchvision.models.resnet50(num_classes=len(ds.classes))
    ddp = nn.parallel.DistributedDataParallel(model) if size > 1 else model
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    it = iter(dl)
    t0, done = None, 0
    for step in range(2 + args.steps):
        if step == 2:
            if size > 1:
                dist.barrier()
            t0 = time.time()
        x, y = next(it)
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if size > 1:
        dist.barrier()
    el = time.time() - t0
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    if size > 1:
        dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"ranks": size, "batch_per_rank": args.batch_size, "steps": args.steps,
                          "samples_per_s": args.steps * args.batch_size * size / el, "peak_rss_mib": rss.item(),
                          "torch": torch.__version__}))


if __name__ == "__main__":
    main()
