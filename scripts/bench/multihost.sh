#!/usr/bin/env bash
# multihost.sh: train across "hosts" made of network namespaces whose links
# are shaped to RATE (scripts/cluster/cluster.sh), the network being the
# bottleneck as between real machines. Needs root.
#
#   scripts/bench/multihost.sh [RATE] [STEPS]        (default 1gbit, 200)
#   SKIP_BENCH=1 scripts/bench/multihost.sh ...      (part 2 only)
#
# 1. `train bench allreduce` (ring, hier, mpi; then ring and hier with fp16
#    on the wire) on 2 hosts x 2 ranks and on 4 hosts x 1 rank: busbw
#    against the link rate.
# 2. MLP training steps on 2 hosts x 2 ranks with each allreduce (and the
#    ring with fp16), measured, next to `train plan --ranks-per-node 2`'s
#    prediction from the latency measured across the hosts (ring
#    allreduce of 8 bytes / its 2(N-1) messages), the compute time
#    measured in the ring run (ms/step minus its gradient wait); the link
#    both at its nominal rate and as fitted from a ring allreduce of the
#    model's gradient between 2 hosts x 1 rank.
set -euo pipefail
cd "$(dirname "$0")/../.."
rate=${1:-1gbit}
steps=${2:-200}
[[ -x ./train ]] || go build -o train .
dir=$(mktemp -d /tmp/multihost.XXXXXX)
trap 'scripts/cluster/cluster.sh down "$dir"; rm -rf "$dir"' EXIT
gbps=$(awk -v r="$rate" 'BEGIN { v = r + 0; if (r ~ /gbit/) print v; else if (r ~ /mbit/) print v / 1000; else print v / 1e9 }')
root=()
[[ $(id -u) == 0 ]] && root=(--allow-run-as-root)

mpi() { # mpi NP ARGS...: mpirun across the cluster
	local np=$1
	shift
	# shellcheck disable=SC2046
	mpirun "${root[@]}" --oversubscribe --bind-to none $(cat "$dir/mpirun.args") -np "$np" "$@"
}

echo "# multihost: links shaped to $rate ($gbps Gbit/s = $(awk -v g="$gbps" 'BEGIN{print g*125}') MB/s each way)"
layouts=("2 2" "4 1")
[[ -n ${SKIP_BENCH:-} ]] && layouts=() # SKIP_BENCH=1: only the training steps and the plan
for layout in "${layouts[@]}"; do
	read -r hosts slots <<<"$layout"
	scripts/cluster/cluster.sh up "$dir" "$hosts" "$rate" "$slots"
	np=$((hosts * slots))
	echo "## $hosts hosts x $slots rank(s): train bench allreduce"
	mpi "$np" ./train bench allreduce --algo ring,hier,mpi -b 1M -e 64M -f 4 -w 2 -n 5 | grep -v '^#'
	mpi "$np" ./train bench allreduce --algo ring,hier --compress fp16 -b 1M -e 64M -f 4 -w 2 -n 5 | grep -v '^#' | tail -n +2
	scripts/cluster/cluster.sh down "$dir"
done

# The link as MPI sees it: the ring allreduce of 8 bytes (latency) and of
# the model's gradient (bandwidth) between 2 hosts x 1 rank, solved from the
# ring's cost like scripts/bench/plan-check.sh does.
params=$(./train plan --model mlp --compute-ms 1 --nodes 2 | sed -n 's/.* \([0-9]*\) parameters.*/\1/p')
bytes=$((4 * params))
scripts/cluster/cluster.sh up "$dir" 2 "$rate" 1
t8=$(mpi 2 ./train bench allreduce --algo ring -b 8 -e 8 -n 50 --csv | awk -F, '$3=="ring"{print $4}')
tn=$(mpi 2 ./train bench allreduce --algo ring -b "$bytes" -e "$bytes" -n 20 --csv | awk -F, '$3=="ring"{print $4}')
scripts/cluster/cluster.sh down "$dir"
# Within a host: hier on 1 host x 2 ranks is its reduce and broadcast alone.
scripts/cluster/cluster.sh up "$dir" 1 "$rate" 2
ti=$(mpi 2 ./train bench allreduce --algo hier -b "$bytes" -e "$bytes" -n 20 --csv | awk -F, '$3=="hier"{print $4}')
scripts/cluster/cluster.sh down "$dir"
intra=$(awk -v t="$ti" -v n="$bytes" 'BEGIN { printf "%.3f", 2 * n / (t * 1e3) }') # GB/s
read -r alpha fit < <(awk -v t8="$t8" -v tn="$tn" -v n="$bytes" 'BEGIN {
	a = t8 / 2                                  # 2(p-1) = 2 messages
	printf "%.2f %.4f\n", a, n * 8 / ((tn - 2 * a - n / 2 / 40e3) * 1e3)  # 2(p-1)/p n = n bytes each way
}')
echo "## link: 2 hosts x 1 rank, ring of 8 bytes $t8 us -> latency $alpha us; ring of $bytes bytes $tn us -> $fit Gbit/s (nominal $gbps)"
echo "## within a host: hier of $bytes bytes on 1 host x 2 ranks (reduce + broadcast) $ti us -> $intra GB/s"
declare -A conv
for c in fp16 bf16; do # one thread's encode + decode of float32 data, GB/s
	conv[$c]=$(./train bench allreduce --compress "$c" -b 8 -e 8 -n 1 | sed -n 's/^# .* encode + decode.*: \([0-9.]*\) GB\/s$/\1/p')
done
echo "## encode + decode, 1 thread: fp16 ${conv[fp16]} GB/s, bf16 ${conv[bf16]} GB/s of float32"

scripts/cluster/cluster.sh up "$dir" 2 "$rate" 2
echo "## 2 hosts x 2 ranks: MLP training, $steps steps"
declare -A ms wait
runs=(ring hier mpi ring:fp16 ring:bf16)
for run in "${runs[@]}"; do
	algo=${run%%:*}
	comp=none
	[[ $run == *:* ]] && comp=${run#*:}
	line=$(mpi 4 ./train --model mlp --allreduce "$algo" --compress "$comp" --max-steps "$steps" --log-every "$steps" 2>&1 | grep '^throughput:')
	ms[$run]=$(sed -n 's/.*; \([0-9.]*\) ms per step.*/\1/p' <<<"$line")
	wait[$run]=$(sed -n 's/.*, \([0-9.]*\) ms of it waiting.*/\1/p' <<<"$line")
done
compute=$(awk -v m="${ms[ring]}" -v w="${wait[ring]}" 'BEGIN { printf "%.3f", m - w }')
for link in "$fit fitted" "$gbps nominal"; do
	read -r g what <<<"$link"
	plan=$(./train plan --model mlp --compute-ms "$compute" --nodes 2 --ranks-per-node 2 --link-gbps "$g" --latency-us "$alpha" --intra-gbs "$intra" --csv)
	echo "# train plan --model mlp --compute-ms $compute --nodes 2 --ranks-per-node 2 --link-gbps $g --latency-us $alpha --intra-gbs $intra ($what link; compressed rows add --compress C --convert-gbs R)"
	printf '%-10s %12s %12s %12s %8s\n' allreduce "ms/step" "wait ms" predicted error
	for run in "${runs[@]}"; do
		key=${run%%:*}
		p=$plan
		if [[ $run == *:* ]]; then
			# 16 bits on the wire: the plan's compressed ring, with this
			# machine's encode + decode rate.
			p=$(./train plan --model mlp --compute-ms "$compute" --nodes 2 --ranks-per-node 2 --link-gbps "$g" --latency-us "$alpha" --intra-gbs "$intra" --csv \
				--compress "${run#*:}" --convert-gbs "${conv[${run#*:}]}")
		fi
		pred=$(awk -F, -v k="$key" '$2==k{print $5}' <<<"$p")
		awk -v r="$run" -v m="${ms[$run]}" -v w="${wait[$run]}" -v p="$pred" 'BEGIN { printf "%-10s %12.2f %12.2f %12.2f %+7.0f%%\n", r, m, w, p, 100 * (p - m) / m }'
	done
done
echo "# compute $compute ms/step: the ring run's ms/step minus its gradient wait"
