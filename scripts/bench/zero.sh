#!/bin/sh
# ZeRO's memory, traffic and step time (issue 17, must-show 5 and 6): a
# GPT of 56.9M parameters (8 layers, dim 768, context 32, bytes: vocab
# 256, AdamW) at np = 1, 2 and 4, --zero 0 to 3, every run printing per
# rank what it holds for parameters, gradients and optimizer state
# (counted from its buffers), its peak RSS, the bytes it sent per step
# (counted by package mpi) and its mean step time. The table sets them
# beside ZeRO's formulas for fp32 with Adam (16Ψ, 8Ψ+8Ψ/N, 4Ψ+12Ψ/N,
# 16Ψ/N) plus a fixed overhead measured separately: one rank with plain
# SGD (no optimizer state) holds 8Ψ, and the rest of its peak RSS is the
# overhead (activations, the runtime, MPI, OpenBLAS). ZeRO's own buffers
# come on top from stage 2 on: the bound each rank prints as its working
# set (two gradient buckets, and at stage 3 two layers' parameters; see
# zeroExecutor.Working), computed from the buckets' and layers' sizes,
# not measured. Then the memory
# limit: --zero 0 and --zero 3 at np=4, each rank in a memory cgroup of
# LIMIT bytes (needs root and writable cgroups).
#   scripts/bench/zero.sh DATA [TRAIN] [LIMIT]
set -eu
data=$1
train=$(realpath "${2:-./train}")
limit=${3:-629145600}
mpi="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
out=$(mktemp)
g="--model gpt --data $data --layers 8 --heads 8 --dim 768 --context 32 --optimizer adamw --lr 1e-4 --batch-size 1 --eval-batch 1 --max-steps 6 --log-every 100 --progress never"
echo "## commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo ?), $(nproc) cores; $g"
$train $g --zero 0 --optimizer sgd --momentum 0 >"$out" 2>&1
psi=$(sed -n 's/^train: gpt .* model, \([0-9]*\) parameters.*/\1/p' "$out")
rss=$(sed -n 's/^zero: rank 0 .*peak RSS \([0-9.]*\) MiB.*/\1/p' "$out")
over=$(echo "$rss - 8 * $psi / 1048576" | bc -l)
printf "Ψ = %d parameters; overhead: np=1 SGD without momentum, peak RSS %.1f MiB - 8Ψ = %.1f MiB\n\n" "$psi" "$rss" "$over"
echo "| np | stage | rank | params+grads+optimizer counted (MiB) | formula (MiB) | working set (MiB) | peak RSS (MiB) | formula + overhead + working set | RSS / (formula + overhead + working set) | sent per step (MiB) | step (ms) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for np in 1 2 4; do
	for z in 0 1 2 3; do
		$mpi -np $np "$train" $g --zero $z >"$out" 2>&1 || { echo "np=$np --zero $z failed:"; tail -5 "$out"; continue; }
		grep '^zero: rank' "$out" | while read -r line; do
			r=$(echo "$line" | sed -n 's/^zero: rank \([0-9]*\) .*/\1/p')
			held=$(echo "$line" | sed -n 's/.*, \([0-9.]*\) MiB in all.*/\1/p')
			work=$(echo "$line" | sed -n 's/.*working set at most \([0-9.]*\) MiB.*/\1/p')
			prss=$(echo "$line" | sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p')
			sent=$(echo "$line" | sed -n 's/.*sent \([0-9.]*\) MiB per step.*/\1/p')
			ms=$(echo "$line" | sed -n 's/.*; \([0-9.]*\) ms per step.*/\1/p')
			case $z in
			0) f="16 * $psi" ;;
			1) f="8 * $psi + 8 * $psi / $np" ;;
			2) f="4 * $psi + 12 * $psi / $np" ;;
			3) f="16 * $psi / $np" ;;
			esac
			fm=$(echo "($f) / 1048576" | bc -l)
			printf "| %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.0f |\n" "$np" "$z" "$r" "$held" "$fm" "$work" "$prss" "$(echo "$fm + $over + $work" | bc -l)" "$(echo "$prss / ($fm + $over + $work)" | bc -l)" "$sent" "$ms"
		done
	done
done
memcg=$(dirname "$(realpath "$0")")/memcg.sh
if ! "$memcg" --check >/dev/null; then
	echo "memory limit: $("$memcg" --check)"
	exit 0
fi
wrap="$memcg $limit"
echo
echo "## np=4 under $(($limit / 1048576)) MiB per rank (a memory cgroup each)"
for z in 0 3; do
	set +e
	$mpi -np 4 $wrap "$train" $g --zero $z >"$out" 2>&1
	rc=$?
	set -e
	echo "### --zero $z: exit $rc"
	grep -E '^zero: rank|^done|killed|Killed|signal' "$out" | head -6
done
"$memcg" --clean
rm -f "$out"
