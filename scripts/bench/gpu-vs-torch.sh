#!/bin/bash
# Our GPU step against PyTorch's on the same GPU, in one run: for each
# model and precision, `train bench step --device cuda` and
# scripts/bench/torch_gpu.py --bench (eager, and torch.compile for fp32),
# both on a synthetic batch (ours builds and uploads a batch every step; the
# PyTorch script reuses one already on the GPU), the same batch size and
# SGD; then the ratio of step times (> 1: ours is faster).
#
#   scripts/bench/gpu-vs-torch.sh [TRAIN_BINARY]     (default .gpu/train)
#   env: BATCH (512), MODELS ("resnet cnn"), PRECISIONS ("fp32 tf32 bf16"), STEPS (50), COMPILE (1)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-.gpu/train}
B=${BATCH:-512} S=${STEPS:-50}
mpi=(mpirun -np 1)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
printf '%-8s %-6s %12s %14s %10s %16s %12s\n' model prec "ours ms" "torch eager ms" "ratio" "torch compile ms" "ratio"
for m in ${MODELS:-resnet cnn}; do
	for p in ${PRECISIONS:-fp32 tf32 bf16}; do
		depth=()
		[ "$m" = resnet ] && depth=(--depth 20)
		ours=$("${mpi[@]}" "$bin" bench step --device cuda --precision "$p" --model "$m" "${depth[@]}" --batch-size "$B" \
			--augment none --steps "$S" --warmup 10 | awk '/^ms\/step/ {print $2}')
		eager=$(python3 scripts/bench/torch_gpu.py --bench --models "$m" --modes eager --precision "$p" --batch "$B" --steps "$S" |
			sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')
		comp=- cr=-
		if [ "${COMPILE:-1}" = 1 ] && [ "$p" = fp32 ]; then
			comp=$(python3 scripts/bench/torch_gpu.py --bench --models "$m" --modes compile --precision "$p" --batch "$B" \
				--steps "$S" --warmup 30 2>/dev/null | sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')
			cr=$(awk -v a="$comp" -v b="$ours" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')
		fi
		er=$(awk -v a="$eager" -v b="$ours" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')
		printf '%-8s %-6s %12s %14s %10s %16s %12s\n' "$m" "$p" "$ours" "$eager" "$er" "${comp:--}" "$cr"
	done
done
