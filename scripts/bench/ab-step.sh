#!/usr/bin/env bash
# Compares `train bench step` of two builds side by side, interleaved
# (A B, B A, A B ...: the machine is shared and noisy, so a figure from another
# run is no baseline), and prints every run, each build's median, and the
# median of the rounds' own speed ratios, old ms/step over new (a round's
# two runs share a stretch of the machine's load, so their ratio moves
# less than either run).
#
#   scripts/bench/ab-step.sh OLD NEW ROUNDS NP [bench step options...]
#   scripts/bench/ab-step.sh .dev/base/train ./train 5 2 --model resnet --depth 20
set -euo pipefail
old=$(realpath "${1:?usage: ab-step.sh OLD NEW ROUNDS NP [options]}")
new=$(realpath "${2:?}")
rounds=${3:?}
np=${4:?}
shift 4
mpi=(mpirun -np "$np" --oversubscribe)
[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
# One rank may use every core (--threads); mpirun would bind it to one.
[[ $np -eq 1 ]] && mpi+=(--bind-to none)
export TRAIN_METRICS_ADDR=
declare -A sps ms rss
ratios=""
for i in $(seq 1 "$rounds"); do
	# A B, then B A: a machine that slows (or speeds up) through the
	# rounds would otherwise always favour the build that runs first.
	order="old new"
	((i % 2 == 0)) && order="new old"
	for which in $order; do
		bin=$old
		[[ $which == new ]] && bin=$new
		out=$("${mpi[@]}" "$bin" bench step "$@")
		s=$(awk '/^samples\/s/{print $2}' <<<"$out")
		m=$(awk '/^ms\/step/{print $2}' <<<"$out")
		r=$(awk '/^peak RSS per rank/{print $5}' <<<"$out")
		echo "round $i $which: $s samples/s, $m ms/step, peak RSS $r MiB"
		sps[$which]+="$s "
		ms[$which]+="$m "
		rss[$which]+="$r "
		if [[ $which == old ]]; then m_old=$m; else m_new=$m; fi
	done
	# From ms/step, which has more digits than samples/s (the GPT's is
	# about 2.0 samples/s, printed to one decimal).
	ratios+="$(awk -v a="$m_old" -v b="$m_new" 'BEGIN{printf "%.4f", a/b}') "
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
o=$(median <<<"${sps[old]}")
n=$(median <<<"${sps[new]}")
echo "median samples/s: old $o, new $n, new/old $(awk -v a="$n" -v b="$o" 'BEGIN{printf "%.3f", a/b}')"
echo "median of the rounds' new/old: $(median <<<"$ratios") ($(awk '{n=0; for (i=1;i<=NF;i++) n+=($i>1); print n}' <<<"$ratios") of $rounds rounds faster)"
echo "median ms/step: old $(median <<<"${ms[old]}"), new $(median <<<"${ms[new]}")"
echo "median peak RSS per rank (MiB): old $(median <<<"${rss[old]}"), new $(median <<<"${rss[new]}")"
