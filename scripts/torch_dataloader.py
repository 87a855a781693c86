#!/usr/bin/python3
"""PyTorch's side of scripts/bench/images-vs-torch.sh: one pass of a
DataLoader over an image folder's training images with torchvision's
ImageNet training transforms, and the images/s.

    /usr/bin/python3 scripts/torch_dataloader.py DIR WORKERS [BATCH] [SIZE] [PASSES]

DIR/train is read with torchvision.datasets.ImageFolder (PIL, Pillow's
libjpeg-turbo) through RandomResizedCrop(SIZE), RandomHorizontalFlip,
ToTensor and Normalize(ImageNet's mean and std), shuffled, in batches of
BATCH, by WORKERS worker processes (0: the main process). Prints one line
of JSON. Needs Debian's python3-torch and python3-torchvision.
"""
import json
import os
import sys
import time

import torch
import torchvision
import torchvision.transforms as T


def main():
    root, workers = sys.argv[1], int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 224
    passes = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(os.path.join(root, "train"), transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
                                     persistent_workers=workers > 0)
    n = 0
    start = time.perf_counter()
    for _ in range(passes):
        for x, _ in dl:
            n += x.shape[0]
    took = time.perf_counter() - start
    print(json.dumps({"images": n, "seconds": took, "images_per_s": n / took, "workers": workers}))


if __name__ == "__main__":
    main()
