#!/usr/bin/env bash
# Runs short fixed-seed training jobs with the train binary BIN and prints,
# per run, the CRC-32C of the final checkpoint's tensors (parameters,
# buffers and optimizer state, from its "crc32c" metadata) and the closing
# line's parameter checksum. Run it with two builds and diff the outputs:
# a refactoring that changes no numbers gives identical files.
#
#   scripts/bench/crc-runs.sh BIN > crcs.txt
#
# Covers MLP, CNN and ResNet-8; allreduce ring, mpi and hier (plus buckets,
# no overlap, compression, AdamW); local-sgd, ps-sync, colocated ps-sync and
# ps-async with staleness 0 (one worker, so the order the server applies
# gradients in is fixed); resume (30 steps, then --resume to 60).
set -euo pipefail
bin=$(realpath "${1:?usage: crc-runs.sh BIN}")
cd "$(dirname "$0")/../.."
data=${TRAIN_DATA:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=(mpirun --oversubscribe --bind-to none)
[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
export TRAIN_METRICS_ADDR=

# run NAME NP ARGS...: train into $tmp/NAME and print NAME, the checkpoint's
# crc32c and the closing line's crc32c.
run() {
	local name=$1 np=$2
	shift 2
	local out
	out=$("${mpi[@]}" -np "$np" "$bin" --data "$data" --log-every 1000 --checkpoint-dir "$tmp/$name" "$@" 2>"$tmp/$name.err") || {
		echo "crc-runs: $name failed:" >&2
		cat "$tmp/$name.err" >&2
		exit 1
	}
	local ck
	ck=$(ls "$tmp/$name"/step-*.safetensors | tail -1)
	printf '%-28s %s ckpt %s params %s\n' "$name" "$(basename "$ck")" \
		"$(head -c 4096 "$ck" | grep -ao '"crc32c":"[0-9a-f]*"' | cut -d'"' -f4)" \
		"$(sed -n 's/.*(crc32c \([0-9a-f]*\)).*/\1/p' <<<"$out")"
}

mlp=(--model mlp --max-steps 60)
run mlp-ring 2 "${mlp[@]}" --allreduce ring
run mlp-mpi 2 "${mlp[@]}" --allreduce mpi
run mlp-hier 2 "${mlp[@]}" --allreduce hier
run mlp-ring-np3 3 "${mlp[@]}" --allreduce ring
run mlp-mpi-np3 3 "${mlp[@]}" --allreduce mpi
run mlp-hier-np3 3 "${mlp[@]}" --allreduce hier
run mlp-buckets-nooverlap 2 "${mlp[@]}" --bucket-mb 0.1 --overlap=false
run mlp-buckets-overlap 2 "${mlp[@]}" --bucket-mb 0.1
run mlp-bf16 2 "${mlp[@]}" --compress bf16
run mlp-adamw-clip 2 "${mlp[@]}" --optimizer adamw --lr 0.001 --weight-decay 0.01 --clip-grad-norm 1 --warmup-steps 10
run mlp-step-schedule 2 "${mlp[@]}" --lr-schedule step --lr-step-epochs 1 --warmup-steps 5 --lr-scaling linear
run cnn-ring 2 --model cnn --max-steps 12
run resnet8-ring 2 --model resnet --depth 8 --max-steps 12
run resnet8-mpi 2 --model resnet --depth 8 --max-steps 12 --allreduce mpi
run resnet8-hier 2 --model resnet --depth 8 --max-steps 12 --allreduce hier
run resnet8-ring-np3 3 --model resnet --depth 8 --max-steps 12 --batch-size 32
run resnet8-mpi-np3 3 --model resnet --depth 8 --max-steps 12 --batch-size 32 --allreduce mpi
run resnet8-bnlocal 2 --model resnet --depth 8 --max-steps 12 --bn local
run local-sgd 2 "${mlp[@]}" --strategy local-sgd --sync-every 8
run ps-sync 3 "${mlp[@]}" --strategy ps-sync --servers 1
run ps-sync-2servers 4 "${mlp[@]}" --strategy ps-sync --servers 2
run ps-sync-colocated 2 "${mlp[@]}" --strategy ps-sync --colocate --servers 2
run ps-async-s0 2 "${mlp[@]}" --strategy ps-async --servers 1 --staleness 0
run ps-async-push2 2 "${mlp[@]}" --strategy ps-async --servers 1 --push-every 2 --fetch-every 2
# Resume: 30 steps, then --resume to 60, in the same directory.
"${mpi[@]}" -np 2 "$bin" --data "$data" --log-every 1000 --checkpoint-dir "$tmp/mlp-resume" --model mlp --max-steps 30 >/dev/null 2>&1
run mlp-resume 2 --model mlp --max-steps 60 --resume
"${mpi[@]}" -np 2 "$bin" --data "$data" --log-every 1000 --checkpoint-dir "$tmp/resnet8-resume" --model resnet --depth 8 --max-steps 6 >/dev/null 2>&1
run resnet8-resume 2 --model resnet --depth 8 --max-steps 12 --resume
