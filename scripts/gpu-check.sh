#!/bin/bash
# The GPU checks of the CUDA path (issue 8), in two halves:
#
#   scripts/gpu-check.sh build        # here (Debian, Go): .gpu/train and .gpu/gpu.test
#   scripts/gpu-check.sh run [DIR]    # on the GPU machine (no Go): runs them from DIR (.gpu)
#
# run: the gpu package's tests (the conformance suite: every layer of MLP,
# CNN and ResNet on the GPU against the CPU from the same weights and batch,
# loss and gradients within 1e-4 in fp32; optimizers; our ring over CUDA IPC
# and over pinned host buffers with 2, 3 and 4 ranks on the one GPU; NCCL;
# the GPT's layers against the CPU's; the same tests on the CUDA emulator
# where g++ is there), then real training jobs under mpirun with 1, 2 and
# 4 ranks sharing the GPU:
# every job must end with parameters identical on all ranks (train checks it
# and says "parameters identical"), and the ring's final parameters must
# match NCCL's and the MPI path's within 1e-5 where NCCL can run; a hung
# rank's flight recorder dumps name the GPU allreduce; the GPT on the GPU
# ends where the CPU path does (SGD, 1e-5), and np=2 where np=1 does.
# Exit 0 only if everything passed. Output goes to stdout and to
# $OUT/record.md (the record for docs/gpu/), and every job's log and
# checkpoint in one file, $OUT/gpu-logs.tgz: the device tool returns only
# so many files from $OUT, and on 2026-11-28 the 68 files written there
# left the record behind.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
build)
	mkdir -p .gpu
	grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.gpu/' >>.git/info/exclude; }
	go build -trimpath -ldflags='-s -w' -o .gpu/train .
	go test -c -trimpath -ldflags='-s -w' -o .gpu/gpu.test ./gpu
	# The record names the commit (the GPU machine's copy has no git).
	{
		git rev-parse --short HEAD
		git diff --quiet HEAD -- . ':!docs' || echo "(with uncommitted changes)"
	} | paste -sd' ' >.gpu/commit
	ls -la .gpu
	exit 0
	;;
run) ;;
*)
	echo "usage: scripts/gpu-check.sh build | run [DIR]" >&2
	exit 2
	;;
esac

bin=$(cd "${2:-.gpu}" && pwd)
out=${OUT:-$(mktemp -d)}
logs=$(mktemp -d)
mkdir -p "$out"
trap 'tar czf "$out/gpu-logs.tgz" -C "$logs" . 2>/dev/null; rm -rf "$logs"' EXIT
# Cut off (timeout signals the whole group, tee too): end through the
# EXIT trap, and let writes to the dead tee fail instead of killing bash.
trap 'exit 143' TERM INT
trap '' PIPE
mpi=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
fail=0
say() { echo "== $*"; }

# Everything below also goes to $out/record.md: the record issue 21 asks
# for, to be copied to docs/gpu/ (the commit, the date, the GPU, driver
# and library versions, and every check with its figure).
exec > >(tee "$out/record.md") 2>&1
say "commit $(cat "$bin/commit" 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
for l in libcuda.so.1 libcudart.so libcublas.so libnvrtc.so libcudnn.so libnccl.so; do
	ldconfig -p | grep -o -m1 "$l[.0-9]* .*=> [^ ]*" | sed 's/.*=> //' | xargs -r readlink -f || true
done | sed 's/^/lib: /'
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>/dev/null || true

say "gpu package tests"
if ! (cd "$bin" && ./gpu.test -test.v -test.count=1 -test.timeout 20m) >"$logs/gpu-test.log" 2>&1; then
	fail=1
	tail -60 "$logs/gpu-test.log"
fi
grep -E '^(---|===) |^    --- |^ok|^PASS|^FAIL|NCCL' "$logs/gpu-test.log" | grep -v '=== RUN' || true

# train MODEL NP ALLREDUCE NAME [flags]: a short training job on synthetic
# data, with cuDNN's deterministic algorithms (cuDNN's measured-fastest
# ones differ from run to run, and some add with atomics; on random labels
# a few steps turn that into visible differences); keeps its final
# checkpoint in $logs/NAME. Returns its status.
train() {
	local model=$1 np=$2 ar=$3 name=$4
	shift 4
	rm -rf "${logs:?}/$name"
	if "${mpi[@]}" -np "$np" "$bin/train" --device cuda --gpu-deterministic --model "$model" --allreduce "$ar" \
		--data synthetic --synthetic-shape 1x28x28 --synthetic-samples 4096 --epochs 1 --max-steps "${STEPS:-4}" \
		--batch-size 32 --lr 0.02 --checkpoint-dir "$logs/$name" --log-every 10 "$@" >"$logs/$name.log" 2>&1 &&
		grep -q "parameters identical on all $np rank" "$logs/$name.log"; then
		echo "ok   $name: $(grep -o 'throughput.*' "$logs/$name.log" | cut -c1-110)"
	else
		if [ -z "${QUIET:-}" ]; then
			echo "FAIL $name"
			tail -20 "$logs/$name.log"
		fi
		return 1
	fi
}

# same A B: the final parameters of runs A and B agree within 1e-4 relative
# (the largest difference over a tensor, over the tensor's largest value).
same() {
	python3 - "$logs/$1" "$logs/$2" <<'PY'
import glob, sys
from safetensors.numpy import load_file
a, b = (load_file(sorted(glob.glob(d + "/*.safetensors"))[-1]) for d in sys.argv[1:3])
import numpy as np
d = [abs(a[k] - b[k]).max() / max(abs(a[k]).max(), 1e-6) for k in a if not k.startswith("optimizer.") and a[k].dtype.kind == "f"]
worst = max(d) if all(np.isfinite(d)) else float("nan")  # a NaN anywhere fails: max() alone can step over it
import os
ok = worst < 1e-4 or os.environ.get("INFO")
print(("info" if os.environ.get("INFO") else "ok  " if ok else "FAIL") + f" {sys.argv[1].split('/')[-1]} vs {sys.argv[2].split('/')[-1]}: parameters differ by {worst:.2g} relative")
sys.exit(0 if ok else 1)
PY
}

say "training jobs on the GPU (synthetic data, 4 steps, deterministic cuDNN algorithms)"
for model in mlp resnet; do
	flags=()
	[ $model = resnet ] && flags=(--depth 8)
	for np in 1 2 4; do
		# With 4 ranks MPI_Allreduce adds in another order than the ring:
		# one step's rounding differences, which later steps on random
		# labels amplify (7e-4 after 4 steps seen), so compare after one.
		STEPS=4
		[ $np = 4 ] && STEPS=1
		export STEPS
		train $model $np ring "$model-np$np-ring" "${flags[@]}" || fail=1
		train $model $np mpi "$model-np$np-mpi" "${flags[@]}" || fail=1
		same "$model-np$np-ring" "$model-np$np-mpi" || fail=1
	done
	export STEPS=4
	train $model 2 ring "$model-np2-ringhost" "${flags[@]}" --gpu-ring host || fail=1
	same "$model-np2-ring" "$model-np2-ringhost" || fail=1
	# Small buckets (several per step), reduced while backward runs and
	# after it: the same sums as one bucket (two ranks add in one order).
	train $model 2 ring "$model-np2-buckets" "${flags[@]}" --bucket-mb 0.02 || fail=1
	train $model 2 ring "$model-np2-buckets-after" "${flags[@]}" --bucket-mb 0.02 --overlap=false || fail=1
	grep -o "in [0-9]* bucket(s)[a-z ]*" "$logs/$model-np2-buckets.log" | head -1
	same "$model-np2-ring" "$model-np2-buckets" || fail=1
	same "$model-np2-ring" "$model-np2-buckets-after" || fail=1
	for np in 1 2; do
		if QUIET=1 train $model $np nccl "$model-np$np-nccl" "${flags[@]}"; then
			same "$model-np$np-ring" "$model-np$np-nccl" || fail=1
		elif grep -q "one GPU per rank" "$logs/$model-np$np-nccl.log"; then
			echo "skip $model-np$np-nccl: $(grep -o -m1 'rank 0: --allreduce nccl.*' "$logs/$model-np$np-nccl.log")"
		else
			echo "FAIL $model-np$np-nccl"
			tail -20 "$logs/$model-np$np-nccl.log"
			fail=1
		fi
	done
done

say "the flight recorder on the GPU path (issue 19): rank 1 hangs at step 3; train doctor names it and the GPU allreduce"
for ar in ring mpi; do
	d="$logs/flight-$ar"
	rm -rf "$d"
	TRAIN_FAULT=1:3:hang "${mpi[@]}" -np 2 "$bin/train" --device cuda --model mlp --allreduce $ar --data synthetic \
		--synthetic-shape 1x28x28 --synthetic-samples 4096 --max-steps 20 --batch-size 32 --log-every 1 \
		--stall-warn 2s --stall-timeout 6s --flight-dir "$d" >"$d.log" 2>&1 || true
	if "$bin/train" doctor --json "$d" >"$d.json" 2>&1 && python3 - "$d.json" "$ar" <<'PY'; then
import json, sys
r, ar = json.load(open(sys.argv[1])), sys.argv[2]
f = next(f for f in r["findings"] if f["kind"] == "behind")
want = "gpu ring" if ar == "ring" else "mpi"
ok = f["rank"] == 1 and f["others"] == [0] and f["call"]["algo"].startswith(want) and f["call"]["label"].startswith("bucket")
print(("ok  " if ok else "FAIL") + " flight-%s: %s" % (ar, f["text"]))
sys.exit(0 if ok else 1)
PY
		:
	else
		echo "FAIL flight-$ar"
		tail -n 20 "$d.log" "$d.json"
		fail=1
	fi
done

say "the GPT on the GPU (issue 21): 2 layers on this README as bytes, 10 steps"
gdata="$logs/gpt-data"
rm -rf "$gdata"
"$bin/train" tokenize --bytes --val-tokens 4096 --out "$gdata" README.md >"$logs/gpt-tokenize.log" 2>&1 || { echo "FAIL tokenize"; fail=1; }
gpt=(--model gpt --layers 2 --heads 2 --dim 64 --context 64 --data "$gdata" --warmup-steps 5 --log-every 5 --eval-batch 32 --max-steps 10)
# gptjob NP NAME DEVICE [flags]: keeps $logs/NAME.
gptjob() {
	local np=$1 name=$2 dev=$3
	shift 3
	rm -rf "${logs:?}/$name"
	if "${mpi[@]}" -np "$np" "$bin/train" --device "$dev" "${gpt[@]}" --checkpoint-dir "$logs/$name" "$@" >"$logs/$name.log" 2>&1 &&
		grep -q "parameters identical on all $np rank" "$logs/$name.log"; then
		echo "ok   $name: $(grep -o 'val loss [0-9.]*' "$logs/$name.log" | tail -1)"
	else
		echo "FAIL $name"
		tail -20 "$logs/$name.log"
		return 1
	fi
}
# gptsame A B TOL: as same, but the attention's key bias (the middle third
# of c_attn.bias) is left out: it has no gradient in exact arithmetic, so
# AdamW rescales each run's own rounding noise there (e2e gptSame).
gptsame() {
	python3 - "$logs/$1" "$logs/$2" "$3" <<'PY'
import glob, sys
from safetensors.numpy import load_file
a, b = (load_file(sorted(glob.glob(d + "/*.safetensors"))[-1]) for d in sys.argv[1:3])
import numpy as np
tol, dim = float(sys.argv[3]), 64
worst, at = 0.0, ""
for k in a:
    if k.startswith("optimizer.") or a[k].dtype.kind != "f":
        continue
    x, y = a[k], b[k]
    if k.endswith("attn.c_attn.bias"):
        x, y = x[list(range(dim)) + list(range(2 * dim, 3 * dim))], y[list(range(dim)) + list(range(2 * dim, 3 * dim))]
    d = abs(x - y).max() / max(abs(x).max(), 1e-6)
    if not np.isfinite(d):  # a NaN fails at once: comparisons would step over it
        worst, at = float("nan"), k
        break
    if d > worst:
        worst, at = d, k
ok = worst < tol
print(("ok  " if ok else "FAIL") + f" {sys.argv[1].split('/')[-1]} vs {sys.argv[2].split('/')[-1]}: parameters differ by {worst:.2g} relative ({at}; tolerance {tol})")
sys.exit(0 if ok else 1)
PY
}
sgdg=(--optimizer sgd --momentum 0.9 --lr 0.1 --batch-size 4)
adamw=(--optimizer adamw --lr 3e-3 --weight-decay 0.1)
gptjob 1 gpt-gpu-sgd cuda "${sgdg[@]}" || fail=1
gptjob 1 gpt-cpu-sgd cpu "${sgdg[@]}" || fail=1
gptsame gpt-cpu-sgd gpt-gpu-sgd 1e-5 || fail=1
gptjob 1 gpt-np1 cuda "${adamw[@]}" --batch-size 4 || fail=1
gptjob 2 gpt-np2 cuda "${adamw[@]}" --batch-size 2 || fail=1
# np=2 against np=1 at the fp32 tolerance of the other checks (1e-4): the
# two runs' cuBLAS products differ in size (another summation order) and
# AdamW scales each difference by its gradient's own size; measured 4.2e-6
# at 2234c7b and 8.9e-6 at 930a41b on the H100.
gptsame gpt-np1 gpt-np2 1e-4 || fail=1

say "the same job on the CPU and the GPU (fp32, 4 steps; rounding differs and grows: reported, not checked)"
rm -rf "$logs/cpu"
"${mpi[@]}" -np 1 "$bin/train" --device cpu --model resnet --depth 8 --data synthetic --synthetic-shape 1x28x28 \
	--synthetic-samples 4096 --epochs 1 --max-steps 4 --batch-size 32 --lr 0.02 --checkpoint-dir "$logs/cpu" >"$logs/cpu.log" 2>&1
INFO=1 same cpu resnet-np1-ring

if [ $fail = 0 ]; then say "all GPU checks passed"; else say "GPU checks FAILED"; fi
exit $fail
