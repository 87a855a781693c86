#!/usr/bin/env bash
# train's GPT training step against PyTorch's on the same configuration,
# side by side and interleaved (train, PyTorch, train, PyTorch, ...: the
# machine is shared and noisy, so a figure from another run is no
# baseline). At np > 1 PyTorch runs as np DDP processes over gloo, launched
# by the same mpirun with the same binding, per-rank batch and threads.
# Prints every run, each one's median tokens/s and peak RSS per rank, and
# the ratio of the medians.
#
#   scripts/bench/gpt-vs-torch.sh ROUNDS NP DATA [--layers 6 --heads 6 --dim 384 --context 256 --batch-size 4 --threads 1 --steps 5 --warmup 1]
#   scripts/bench/gpt-vs-torch.sh 5 2 data/kjv
set -euo pipefail
rounds=${1:?usage: gpt-vs-torch.sh ROUNDS NP DATA [options]}
np=${2:?}
data=${3:?}
shift 3
declare -A o=([layers]=6 [heads]=6 [dim]=384 [context]=256 [batch-size]=4 [threads]=1 [steps]=5 [warmup]=1)
while [[ $# -gt 0 ]]; do
	k=${1#--}
	[[ -v o[$k] ]] || { echo "gpt-vs-torch.sh: unknown option $1" >&2; exit 2; }
	o[$k]=${2:?$1 needs a value}
	shift 2
done
here=$(dirname "$(realpath "$0")")
. "$here/same-blas.sh"
train=${TRAIN_BIN:-$here/../../train}
mpi=(mpirun -np "$np" --oversubscribe)
[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
export TRAIN_METRICS_ADDR=
sizes=(--layers "${o[layers]}" --heads "${o[heads]}" --dim "${o[dim]}" --context "${o[context]}" --batch-size "${o[batch-size]}" --threads "${o[threads]}")
same_blas "$train"
echo "# np $np, ${sizes[*]}, ${o[warmup]} warm-up + ${o[steps]} timed steps, AdamW; data $data"
tt="" tr="" pt="" pr=""
for i in $(seq 1 "$rounds"); do
	out=$("${mpi[@]}" "$train" bench step --model gpt --data "$data" "${sizes[@]}" --optimizer adamw --lr 6e-4 --beta2 0.95 --weight-decay 0.1 --warmup "${o[warmup]}" --steps "${o[steps]}")
	t=$(awk '/^tokens\/s/{print $2}' <<<"$out")
	r=$(awk '/^peak RSS per rank/{print $5}' <<<"$out")
	mfu=$(awk '/^MFU/{print $2}' <<<"$out")
	sg=$(awk '/^# SGEMM/{print $(NF-5)}' <<<"$out")
	echo "round $i train:   $t tokens/s, MFU $mfu (SGEMM $sg GFLOP/s per rank), peak RSS $r MiB"
	tt+="$t " tr+="$r "
	out=$("${mpi[@]}" /usr/bin/python3 "$here/../torch_gpt.py" bench --data "$data" "${sizes[@]}" --warmup "${o[warmup]}" --steps "${o[steps]}")
	t=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read())["tokens_per_s"])' <<<"$out")
	r=$(python3 -c 'import json,sys; print("%.0f" % json.loads(sys.stdin.read())["peak_rss_mib"])' <<<"$out")
	echo "round $i PyTorch: $t tokens/s, peak RSS $r MiB"
	pt+="$t " pr+="$r "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
a=$(median <<<"$tt")
b=$(median <<<"$pt")
echo "median tokens/s: train $a, PyTorch $b, train/PyTorch $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", a/b}')"
echo "median peak RSS per rank (MiB): train $(median <<<"$tr"), PyTorch $(median <<<"$pr")"
