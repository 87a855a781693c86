#!/usr/bin/env bash
# ResNet-50 training at np=2 on an image folder: train against PyTorch
# (torchvision's resnet50, DDP over gloo, a DataLoader with the same
# transforms) on the same files, interleaved (train, PyTorch, ...), one
# thread and one decoding worker per rank each. Prints every run, each
# side's median samples/s and peak RSS per rank, and the ratio.
#
#   scripts/bench/resnet50-vs-torch.sh ROUNDS DIR [STEPS]
#
# DIR: as scripts/bench/images-vs-torch.sh makes it (train/ of JPEGs);
# a val/ is added if missing (train reads one; these runs stop before
# the epoch's evaluation).
set -euo pipefail
rounds=${1:?usage: resnet50-vs-torch.sh ROUNDS DIR [STEPS]}
dir=${2:?}
steps=${3:-6} # even: train logs every 2 steps
here=$(dirname "$(realpath "$0")")
. "$here/same-blas.sh"
train=${TRAIN_BIN:-$here/../../train}
export TRAIN_METRICS_ADDR=
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
[[ -d $dir/train ]] || { echo "$dir/train missing: run scripts/bench/images-vs-torch.sh first" >&2; exit 1; }
if [[ ! -d $dir/val ]]; then
	for c in "$dir"/train/*; do mkdir -p "$dir/val/$(basename "$c")" && cp "$(ls "$c"/* | head -1)" "$dir/val/$(basename "$c")/"; done
fi
mpi=(mpirun -np 2 --oversubscribe)
[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
same_blas "$train"
echo "commit $(git -C "$here" rev-parse --short HEAD), $(nproc) cores"
ours="" theirs="" rss_o="" rss_t=""
for r in $(seq "$rounds"); do
	# Both leave the first two steps out as warm-up: train's log records
	# (--log-file), every 2 steps, give each window's samples/s (wall
	# time, logging included); the harmonic mean of those after step 2 is
	# samples over time.
	log=$(mktemp)
	out=$("${mpi[@]}" /usr/bin/time -f "maxrss %M" "$train" --model resnet --depth 50 --data "$dir" --image-size 224 --batch-size 8 --threads 1 --data-workers 1 \
		--bn local --max-steps $((steps + 2)) --log-every 2 --log-file "$log" --lr 0.05 2>&1)
	a=$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1])]
s=[x["samples_per_second"] for x in r if x.get("type")=="step" and x["step"]>2]
print("%.2f" % (len(s)/sum(1/v for v in s)))' "$log")
	rm -f "$log"
	ra=$(echo "$out" | sed -n 's/^maxrss \([0-9]*\)/\1/p' | sort -n | tail -1)
	b=$("${mpi[@]}" /usr/bin/python3 "$here/../torch_bench.py" --model resnet50 --data "$dir" --batch-size 8 --workers 1 --warmup 2 --steps "$steps" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.2f %.0f" % (d["samples_per_s"], d["peak_rss_mib"]))')
	echo "round $r: train $a samples/s (peak RSS $((ra / 1024)) MiB), PyTorch ${b% *} samples/s (peak RSS ${b#* } MiB)"
	ours+=" $a" theirs+=" ${b% *}"
done
mo=$(echo "$ours" | median) mt=$(echo "$theirs" | median)
echo "median train $mo, PyTorch $mt samples/s, train/PyTorch $(awk "BEGIN{printf \"%.2f\", $mo/$mt}")"
