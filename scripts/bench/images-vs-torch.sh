#!/usr/bin/env bash
# Decoding and augmenting an image folder: train against PyTorch's
# DataLoader (torchvision's ImageFolder, RandomResizedCrop(224),
# RandomHorizontalFlip, ToTensor, Normalize; Pillow's libjpeg-turbo) on the
# same files, with the same number of workers (train's decoding goroutines,
# PyTorch's worker processes), interleaved (train, PyTorch, train, ...).
# Prints every run, each side's median images/s and the ratio.
#
#   scripts/bench/images-vs-torch.sh ROUNDS DIR [WORKERS...]
#
# DIR must hold train/ (class folders of JPEG or PNG files); with
# DIR missing, it is made: 512 JPEG photographs' worth of pixels, CIFAR-10's
# test images enlarged to 500x375 and 375x500 with noise (quality 90, 4:2:0).
set -euo pipefail
rounds=${1:?usage: images-vs-torch.sh ROUNDS DIR [WORKERS...]}
dir=${2:?}
shift 2
workers=("${@:-1}")
[[ $# -eq 0 ]] && workers=(1 2)
here=$(dirname "$(realpath "$0")")
train=${TRAIN_BIN:-$here/../../train}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
if [[ ! -d $dir/train ]]; then
	/usr/bin/python3 - "$dir" "$here/../../testdata/cifar10-mini" <<'PY'
import os, sys
import numpy as np
from PIL import Image
out, cifar = sys.argv[1], sys.argv[2]
rec = np.concatenate([np.fromfile(os.path.join(cifar, b), dtype=np.uint8).reshape(-1, 3073) for b in ("data_batch_1.bin", "data_batch_2.bin", "test_batch.bin")])
rng = np.random.RandomState(7)
for i in range(512):
    r = rec[i % len(rec)]
    img = Image.fromarray(r[1:].reshape(3, 32, 32).transpose(1, 2, 0)).resize((500, 375) if i % 3 else (375, 500), Image.BICUBIC)
    a = np.asarray(img).astype(np.int16) + rng.randint(-12, 13, size=(img.size[1], img.size[0], 3))
    d = os.path.join(out, "train", f"class{i % 8}")
    os.makedirs(d, exist_ok=True)
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(os.path.join(d, f"{i:05d}.jpg"), quality=90)
PY
fi
echo "commit $(git -C "$here" rev-parse --short HEAD), $(nproc) cores, $(find "$dir/train" -type f | wc -l) images"
for w in "${workers[@]}"; do
	ours="" theirs=""
	for r in $(seq "$rounds"); do
		a=$("$train" data bench --workers "$w" --batch-size 32 "$dir" | sed -n 's/.*: \([0-9.]*\) images\/s with.*/\1/p')
		b=$(/usr/bin/python3 "$here/../torch_dataloader.py" "$dir" "$w" 32 | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["images_per_s"])')
		echo "workers $w round $r: train $a images/s, PyTorch $b images/s"
		ours+=" $a" theirs+=" $b"
	done
	mo=$(echo "$ours" | median) mt=$(echo "$theirs" | median)
	echo "workers $w: median train $mo, PyTorch $mt images/s, train/PyTorch $(awk "BEGIN{printf \"%.2f\", $mo/$mt}"), per worker train $(awk "BEGIN{printf \"%.1f\", $mo/$w}") PyTorch $(awk "BEGIN{printf \"%.1f\", $mt/$w}")"
done
