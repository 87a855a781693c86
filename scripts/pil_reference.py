#!/usr/bin/python3
"""Pillow's pixels, the reference for train's image code (data/resize.go).

    /usr/bin/python3 scripts/pil_reference.py resize DIR

    /usr/bin/python3 scripts/pil_reference.py decode DIR FASHION_DIR CIFAR_DIR

resize: seeded random RGB and greyscale images of several sizes, each
resized with Image.resize(size, Image.BILINEAR) (torchvision's Resize and
RandomResizedCrop on PIL images) to sizes smaller, larger and mixed
(one side shrinks, the other grows); writes DIR/cases.json (the shapes)
and DIR/in-N.raw, DIR/out-N.raw (row-major, channels interleaved).
decode: real Fashion-MNIST and CIFAR-10 images, enlarged (one past 500
pixels), saved as PNG (RGB, RGBA, L, LA, palette, palette with
transparency, 16-bit greyscale) and JPEG (baseline 4:4:4, 4:2:0,
progressive, greyscale, CMYK), and broken files (truncated, not an image,
empty); writes each file, DIR/cases.json, and for each file PIL opens,
Image.open(f).convert("RGB") (torchvision's loader) as DIR/NAME.raw.
Needs Debian's python3-pil and python3-numpy.
"""
import gzip
import json
import os
import sys

import numpy as np
from PIL import Image


def resize_cases(out):
    rng = np.random.RandomState(20261124)
    shapes = [(64, 48, 3), (500, 375, 3), (37, 53, 1), (7, 5, 3), (256, 256, 3)]
    targets = [(224, 224), (32, 32), (301, 17), (13, 400), (1, 1)]
    cases = []
    for w, h, c in shapes:
        img = rng.randint(0, 256, size=(h, w, c), dtype=np.uint8)
        # Smooth areas too, not only noise: a gradient plus noise.
        img = np.clip(img // 4 + (np.arange(w)[None, :, None] * 190 // max(w - 1, 1)), 0, 255).astype(np.uint8)
        pil = Image.fromarray(img[:, :, 0] if c == 1 else img, "L" if c == 1 else "RGB")
        for ow, oh in targets + [(w * 2 + 1, h // 3 + 1)]:
            n = len(cases)
            img.tofile(os.path.join(out, f"in-{n}.raw"))
            res = np.asarray(pil.resize((ow, oh), Image.BILINEAR))
            res.tofile(os.path.join(out, f"out-{n}.raw"))
            cases.append({"w": w, "h": h, "c": c, "ow": ow, "oh": oh})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f)
    print(len(cases), "cases")


def real_images(fashion, cifar):
    with gzip.open(os.path.join(fashion, "t10k-images-idx3-ubyte.gz")) as f:
        f.read(16)
        fm = np.frombuffer(f.read(28 * 28 * 2), dtype=np.uint8).reshape(2, 28, 28)
    with open(os.path.join(cifar, "test_batch.bin"), "rb") as f:
        rec = np.frombuffer(f.read(2 * 3073), dtype=np.uint8).reshape(2, 3073)
    cf = rec[:, 1:].reshape(2, 3, 32, 32).transpose(0, 2, 3, 1)
    return [
        ("fashion0", Image.fromarray(fm[0], "L")),
        ("fashion1-600", Image.fromarray(fm[1], "L").resize((600, 600), Image.BICUBIC)),
        ("cifar0", Image.fromarray(np.ascontiguousarray(cf[0]), "RGB")),
        ("cifar1-517x389", Image.fromarray(np.ascontiguousarray(cf[1]), "RGB").resize((517, 389), Image.BICUBIC)),
    ]


def decode_cases(out, fashion, cifar):
    cases = []

    def add(name, save, broken=False):
        path = os.path.join(out, name)
        save(path)
        case = {"file": name, "broken": broken}
        if not broken:
            rgb = np.asarray(Image.open(path).convert("RGB"))
            rgb.tofile(path + ".raw")
            case["w"], case["h"] = rgb.shape[1], rgb.shape[0]
        cases.append(case)

    for name, im in real_images(fashion, cifar):
        rgb = im.convert("RGB")
        add(f"{name}-rgb.png", lambda p: rgb.save(p))
        add(f"{name}-l.png", lambda p: im.convert("L").save(p))
        rgba = rgb.copy()
        rgba.putalpha(Image.linear_gradient("L").resize(rgb.size))
        add(f"{name}-rgba.png", lambda p: rgba.save(p))
        add(f"{name}-la.png", lambda p: rgba.convert("LA").save(p))
        pal = rgb.quantize(64)
        add(f"{name}-p.png", lambda p: pal.save(p))
        add(f"{name}-ptrns.png", lambda p: pal.save(p, transparency=3))
        i16 = Image.fromarray((np.asarray(im.convert("L")).astype(np.uint16) * 3).astype(np.uint16), "I;16")
        add(f"{name}-i16.png", lambda p: i16.save(p))
        add(f"{name}-444.jpg", lambda p: rgb.save(p, quality=90, subsampling=0))
        add(f"{name}-420.jpg", lambda p: rgb.save(p, quality=90, subsampling=2))
        add(f"{name}-progressive.jpg", lambda p: rgb.save(p, quality=85, progressive=True))
        add(f"{name}-grey.jpg", lambda p: im.convert("L").save(p, quality=90))
        add(f"{name}-cmyk.jpg", lambda p: rgb.convert("CMYK").save(p, quality=95))
    good = os.path.join(out, cases[7]["file"])
    with open(good, "rb") as f:
        blob = f.read()
    add("truncated.jpg", lambda p: open(p, "wb").write(blob[: len(blob) // 2]), True)
    with open(os.path.join(out, cases[0]["file"]), "rb") as f:
        png = f.read()
    add("truncated.png", lambda p: open(p, "wb").write(png[: len(png) // 2]), True)
    add("not-an-image.jpg", lambda p: open(p, "wb").write(b"this is text, not a JPEG\n" * 10), True)
    add("empty.png", lambda p: open(p, "wb").close(), True)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f)
    print(len(cases), "cases")


if __name__ == "__main__":
    {"resize": resize_cases, "decode": decode_cases}[sys.argv[1]](*sys.argv[2:])
