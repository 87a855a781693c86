#!/usr/bin/python3
"""Pillow's pixels, the reference for train's image code (data/resize.go).

    /usr/bin/python3 scripts/pil_reference.py resize DIR

    /usr/bin/python3 scripts/pil_reference.py decode DIR FASHION_DIR CIFAR_DIR
    /usr/bin/python3 scripts/pil_reference.py transforms DIR FASHION_DIR CIFAR_DIR

resize: seeded random RGB and greyscale images of several sizes, each
resized with Image.resize(size, Image.BILINEAR) (torchvision's Resize and
RandomResizedCrop on PIL images) to sizes smaller, larger and mixed
(one side shrinks, the other grows); writes DIR/cases.json (the shapes)
and DIR/in-N.raw, DIR/out-N.raw (row-major, channels interleaved).
decode: real Fashion-MNIST and CIFAR-10 images, enlarged (one past 500
pixels), saved as PNG (RGB, RGBA, L, LA, palette, palette with
transparency, 16-bit greyscale) and JPEG (baseline 4:4:4, 4:2:0,
progressive, greyscale, CMYK), BMP (RGB, L, palette), TIFF (RGB, LZW, L,
RGBA), WebP (lossless and lossy, RGB and RGBA), and broken files
(truncated JPEG, PNG and WebP, not an image, empty, and a PPM, which
train does not read); writes each file, DIR/cases.json, and for each file PIL opens,
Image.open(f).convert("RGB") (torchvision's loader) as DIR/NAME.raw.
transforms: torchvision's (python3-torchvision) training view
resized_crop(box, size) with and without hflip, and evaluation view
Resize(resize) then CenterCrop(size), on the real images above (RGB);
writes DIR/cases.json, each input DIR/img-N.raw and each output
DIR/out-N.raw, and for the first evaluation view ToTensor then Normalize
with ImageNet's mean and std as float32 (DIR/norm.raw).
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
        add(f"{name}-rgb.bmp", lambda p: rgb.save(p))
        add(f"{name}-l.bmp", lambda p: im.convert("L").save(p))
        add(f"{name}-p.bmp", lambda p: pal.save(p))
        add(f"{name}-rgb.tif", lambda p: rgb.save(p))
        add(f"{name}-lzw.tif", lambda p: rgb.save(p, compression="tiff_lzw"))
        add(f"{name}-l.tif", lambda p: im.convert("L").save(p))
        add(f"{name}-rgba.tif", lambda p: rgba.save(p))
        add(f"{name}-lossless.webp", lambda p: rgb.save(p, lossless=True))
        add(f"{name}-rgbalossless.webp", lambda p: rgba.save(p, lossless=True))
        add(f"{name}-lossy.webp", lambda p: rgb.save(p, quality=90))
        add(f"{name}-rgbalossy.webp", lambda p: rgba.save(p, quality=90))
    good = os.path.join(out, cases[7]["file"])
    with open(good, "rb") as f:
        blob = f.read()
    add("truncated.jpg", lambda p: open(p, "wb").write(blob[: len(blob) // 2]), True)
    with open(os.path.join(out, cases[0]["file"]), "rb") as f:
        png = f.read()
    add("truncated.png", lambda p: open(p, "wb").write(png[: len(png) // 2]), True)
    add("not-an-image.jpg", lambda p: open(p, "wb").write(b"this is text, not a JPEG\n" * 10), True)
    add("empty.png", lambda p: open(p, "wb").close(), True)
    # PPM, in torchvision's extensions, is named as not read.
    add("image.ppm", lambda p: Image.open(good).convert("RGB").save(p), True)
    with open(os.path.join(out, cases[-6]["file"]), "rb") as f:
        webp = f.read()
    add("truncated.webp", lambda p: open(p, "wb").write(webp[: len(webp) // 2]), True)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f)
    print(len(cases), "cases")


def transform_cases(out, fashion, cifar):
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as TF

    imgs = [im.convert("RGB") for _, im in real_images(fashion, cifar)]
    cases = []
    for n, im in enumerate(imgs):
        np.asarray(im).tofile(os.path.join(out, f"img-{n}.raw"))
        w, h = im.size
        boxes = [(0, 0, w, h), (w // 7, h // 5, w // 2, h // 3), (w - w // 3, h - h // 4, w // 3, h // 4), (1, 2, max(w // 9, 1), h - 3)]
        for bx, by, bw, bh in boxes:
            for size in (224, 32):
                for flip in (False, True):
                    res = TF.resized_crop(im, by, bx, bh, bw, [size, size], T.InterpolationMode.BILINEAR)
                    if flip:
                        res = TF.hflip(res)
                    k = len(cases)
                    np.asarray(res).tofile(os.path.join(out, f"out-{k}.raw"))
                    cases.append({"img": n, "w": w, "h": h, "kind": "train", "box": [bx, by, bw, bh], "size": size, "flip": flip})
        for resize, size in ((256, 224), (40, 32), (20, 24)):
            res = T.CenterCrop(size)(T.Resize(resize)(im))
            k = len(cases)
            np.asarray(res).tofile(os.path.join(out, f"out-{k}.raw"))
            cases.append({"img": n, "w": w, "h": h, "kind": "eval", "resize": resize, "size": size})
            if n == 3 and resize == 256:
                norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])(T.ToTensor()(res))
                norm.numpy().astype(np.float32).tofile(os.path.join(out, "norm.raw"))
                cases[-1]["norm"] = True
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f)
    print(len(cases), "cases")


if __name__ == "__main__":
    {"resize": resize_cases, "decode": decode_cases, "transforms": transform_cases}[sys.argv[1]](*sys.argv[2:])
