#!/usr/bin/env bash
# The flight recorder's cost on a whole run: the MLP at np=2 with the
# recorder on (--flight-events 4096, the default) and off (0), in ABBA
# order, ROUNDS times; prints each run's samples/s (train's closing
# throughput line), each side's median and the ratio on/off.
#
#   scripts/bench/flight-cost.sh ROUNDS [STEPS]
set -euo pipefail
rounds=${1:?usage: flight-cost.sh ROUNDS [STEPS]}
steps=${2:-3000}
here=$(dirname "$(realpath "$0")")
train=${TRAIN_BIN:-$here/../../train}
export TRAIN_METRICS_ADDR=
mpi=(mpirun -np 2 --oversubscribe)
[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
one() {
	"${mpi[@]}" "$train" --model mlp --max-steps "$steps" --log-every 1000 --flight-events "$1" |
		sed -n 's/^throughput: .* \([0-9.]*\) samples\/s.*/\1/p'
}
on="" off=""
for i in $(seq "$rounds"); do
	for side in on off off on; do
		if [[ $side == on ]]; then v=$(one 4096); on+=" $v"; else v=$(one 0); off+=" $v"; fi
		echo "round $i $side: $v samples/s"
	done
done
mon=$(echo "$on" | median) moff=$(echo "$off" | median)
echo "median on $mon samples/s, off $moff samples/s, on/off $(awk "BEGIN{printf \"%.3f\", $mon/$moff}")"
