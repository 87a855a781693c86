#!/usr/bin/env bash
# plan-check.sh: train plan's predictions against measured step times on
# this machine, for each strategy of `train bench strategies`.
#
#   scripts/bench/plan-check.sh [NP ...]          (default: 2 4)
#
# For each NP it measures, with ./train under mpirun:
#   - the network: the ring allreduce's time for 8 bytes (latency: alpha =
#     t / 2(NP-1)) and for the model's gradient (bandwidth, solved from the
#     ring's cost 2(p-1) alpha + 2(p-1)/p n/B + (p-1)/p n/R, R = --reduce-gbs);
#   - the step times: `train bench strategies --csv`;
#   - the compute time: the ring row's ms/step minus its communication wait;
# then runs `train plan --csv` with those figures and prints measured and
# predicted ms/step per strategy with the relative error.
#
# Extra training flags (the model, batch, ...) come from TRAIN_ARGS, e.g.
#   TRAIN_ARGS="--model mlp --hidden 256" scripts/bench/plan-check.sh 2 4
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x ./train ]] || go build -o train .
nps=("$@")
[[ ${#nps[@]} -gt 0 ]] || nps=(2 4)
args=(${TRAIN_ARGS:---model mlp})
steps=${STEPS:-300}
reduce_gbs=${REDUCE_GBS:-40}
mpirun=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)

# Gradient bytes: train plan prints the parameter count.
params=$(./train plan "${args[@]}" --compute-ms 1 --nodes 2 | sed -n 's/.* \([0-9]*\) parameters.*/\1/p')
bytes=$((4 * params))
echo "# plan-check: ${args[*]}: $params parameters ($bytes bytes of gradients); $steps timed steps; reduction $reduce_gbs GB/s"
printf '%-3s %-32s %10s %10s %8s\n' np strategy measured predicted error
for np in "${nps[@]}"; do
	t8=$("${mpirun[@]}" -np "$np" ./train bench allreduce --algo ring -b 8 -e 8 -n 200 --csv 2>/dev/null | awk -F, '$3=="ring"{print $4}')
	tn=$("${mpirun[@]}" -np "$np" ./train bench allreduce --algo ring -b "$bytes" -e "$bytes" -n 100 --csv 2>/dev/null | awk -F, '$3=="ring"{print $4}')
	read -r alpha_us gbps < <(awk -v p="$np" -v t8="$t8" -v tn="$tn" -v n="$bytes" -v r="$reduce_gbs" 'BEGIN {
		a = t8 / (2 * (p - 1))                                  # us per message
		f = (p - 1) / p
		rest = tn - 2 * (p - 1) * a - f * n / (r * 1e3)         # us left for the bytes on the wire
		if (rest <= 0) rest = tn / 10
		printf "%.3f %.4f\n", a, 2 * f * n * 8 / (rest * 1e3)   # Gbit/s
	}')
	bench=$("${mpirun[@]}" -np "$np" ./train bench strategies "${args[@]}" --steps "$steps" --warmup 20 --csv 2>/dev/null)
	compute=$(awk -F, '$1=="allreduce ring"{printf "%.4f", $5 - $6}' <<<"$bench")
	echo "# np=$np: ring 8 B $t8 us -> latency $alpha_us us; ring $bytes B $tn us -> link $gbps Gbit/s; compute $compute ms/step (ring row: ms/step - wait)"
	plan1=$(./train plan "${args[@]}" --compute-ms "$compute" --nodes "$np" --link-gbps "$gbps" --latency-us "$alpha_us" --reduce-gbs "$reduce_gbs" --servers 1 --csv)
	plan2=$(./train plan "${args[@]}" --compute-ms "$compute" --nodes "$np" --link-gbps "$gbps" --latency-us "$alpha_us" --reduce-gbs "$reduce_gbs" --servers 2 --csv)
	while IFS=, read -r name _ _ _ ms _; do
		case $name in
		"allreduce ring") key=ring plan=$plan1 ;;
		"allreduce mpi") key=mpi plan=$plan1 ;;
		"ps-sync 1 server") key=ps-sync plan=$plan1 ;;
		"ps-sync 2 servers") key=ps-sync plan=$plan2 ;;
		ps-async*) key=ps-async plan=$plan1 ;;
		local-sgd*) key=local-sgd plan=$plan1 ;;
		*) continue ;;
		esac
		pred=$(awk -F, -v k="$key" '$2==k{print $5}' <<<"$plan")
		[[ -n $pred ]] || continue
		awk -v np="$np" -v s="$name" -v m="$ms" -v p="$pred" 'BEGIN { printf "%-3s %-32s %10.3f %10.3f %+7.0f%%\n", np, s, m, p, 100 * (p - m) / m }'
	done <<<"$bench"
done
