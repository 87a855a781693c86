#!/usr/bin/env bash
# train against PyTorch (Debian's python3-torch) on this machine's CPU, for
# ResNet-20, the MLP and the GPT, at np=1 with T threads and at np=T with
# one thread per rank, side by side and interleaved (train, PyTorch,
# PyTorch with jemalloc, train, ...: the machine is shared and noisy, so a
# figure from another run is no baseline). Prints every run, each side's
# median and peak RSS per rank, the ratios of the medians, and each
# round's own ratio of train to the faster PyTorch with their median.
#
#   scripts/bench/cpu-vs-torch.sh ROUNDS GPT_DATA [T]
#   scripts/bench/cpu-vs-torch.sh 5 data/kjv        # T: this machine's cores
#
# Then train alone at np=1 with 1 and with T threads, interleaved (the
# order alternating round by round): how a rank scales with its threads
# (the issue's target: at least 0.9 T), with each round's own speed-up
# and their median. T one-thread processes, each on its own core and
# sharing nothing, run in the same rounds: the most T cores give this
# work here. SCALE_ONLY=1 runs only that part, COMPARE_ONLY=1 only the
# comparisons; WORKLOADS (below) picks both (the scaling part has
# winograd's ResNet-20 and the GPT).
#
# ResNet-20 and the MLP: batch 64 per rank of 1x28x28, SGD with momentum,
# BatchNorm per rank on both sides (PyTorch DDP's default; train
# --bn local). The MLP runs 2,000 steps after 100 of warm-up: its 200
# (about 0.2 s) swung PyTorch 10,900 to 84,800 samples/s and train at 2
# threads 65,800 to 80,100 between rounds on the Zen 5 VM (44th
# session). The GPT: scripts/bench/gpt-vs-torch.sh's configuration
# (6 layers, 6 heads, width 384, context 256, 4 windows per rank, AdamW
# at torch_gpt.py's lr 6e-4 and beta2 0.95 on both sides: at train's
# default --lr 0.05 the GPT diverges within 3 steps, and on an Intel core
# its steps then slowed tenfold, 4.0 to 43 s).
#
# OpenBLAS picks its kernels from the CPU unless OPENBLAS_CORETYPE names
# them, and both sides use it (train for every product, PyTorch for its
# linear layers; its convolutions are oneDNN's, which ignores it): the
# header prints the variable and the CPU, and the script passes the
# environment unchanged to both. `env -u OPENBLAS_CORETYPE` in front runs
# both as a machine without the variable would, except where OpenBLAS
# falls back to its Prescott kernels: then PyTorch gets the kernels train
# loads (same-blas.sh says why).
#
# PyTorch runs twice a round: as installed (glibc's malloc), and with
# jemalloc preloaded and never handing pages back (PyTorch's CPU tuning
# guide recommends jemalloc or tcmalloc). PyTorch frees and reallocates
# its large tensors every step, and glibc hands large blocks back to the
# kernel as they are freed, so every step faults them in again: a page
# fault costs 10 to 14 us a 4 KiB page on this project's VM, 50 times a
# bare machine's (machine-probe.sh). train keeps its buffers. The ratio
# that counts is against the faster of the two.
#
# TRAIN_GEMM2=G adds, in every round, train again with --gemm G (the
# order of the two train runs turning round by round), with its own
# medians and round ratios: a --gemm path against the default, and both
# against PyTorch, in one run.
#
# A run that exits non-zero (PyTorch's gloo sometimes aborts at exit with
# "terminate called without an active exception") is run once more, and
# the retry is printed.
set -euo pipefail
rounds=${1:?usage: cpu-vs-torch.sh ROUNDS GPT_DATA [T]}
data=${2:?}
T=${3:-$(nproc)}
here=$(dirname "$(realpath "$0")")
. "$here/same-blas.sh"
train=${TRAIN_BIN:-$here/../../train}
export TRAIN_METRICS_ADDR=
# PYTHON and JEMALLOC name others (the GPU machine's PyTorch, a carried
# jemalloc: scripts/bench/many-cores.sh).
python=${PYTHON:-/usr/bin/python3}
jemalloc=${JEMALLOC:-/usr/lib/x86_64-linux-gnu/libjemalloc.so.2} jconf=dirty_decay_ms:-1,muzzy_decay_ms:-1
[[ -e $jemalloc ]] || { echo "cpu-vs-torch.sh: $jemalloc is missing: apt-get install libjemalloc2" >&2; exit 1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
json() { python3 -c "import json,sys; print('%.1f' % json.loads(sys.stdin.read())['$1'])"; }

# twice CMD...: CMD's output; if CMD failed, says so on stderr and prints
# the output of a second try instead.
twice() {
	local o
	if o=$("$@"); then
		printf '%s\n' "$o"
		return
	fi
	echo "(retry: $* exited non-zero)" >&2
	"$@"
}

# run NAME NP THREADS TRAIN_ARGS -- TORCH_ARGS
run() {
	local name=$1 np=$2 threads=$3
	shift 3
	local targs=() pargs=()
	while [[ $1 != -- ]]; do targs+=("$1"); shift; done
	shift
	pargs=("$@")
	local mpi=(mpirun -np "$np" --oversubscribe)
	[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
	# One rank with T threads may use every core; T ranks get one each.
	[[ $np -eq 1 ]] && mpi+=(--bind-to none)
	local unit=samples/s key=samples_per_s
	[[ ${pargs[0]} == *torch_gpt.py ]] && unit=tokens/s key=tokens_per_s
	local tt="" pt="" jt="" tr="" pr="" jr="" rr="" t2s="" rr2="" g2=${TRAIN_GEMM2:-} t2="" x2=""
	echo "## $name: np $np, $threads thread(s) per rank"
	for i in $(seq 1 "$rounds"); do
		# second: train's rate with --gemm $g2, before train in even rounds
		# and after it in odd ones.
		second() { [[ -n $g2 && $((i % 2)) -eq $1 ]] && t2=$(twice "${mpi[@]}" "$train" bench step "${targs[@]}" --threads "$threads" --gemm "$g2" | awk -v u="$unit" '$1==u{print $2}'); :; }
		second 0
		out0=$(twice "${mpi[@]}" "$train" bench step "${targs[@]}" --threads "$threads")
		second 1
		t=$(awk -v u="$unit" '$1==u{print $2}' <<<"$out0")
		r=$(awk '/^peak RSS per rank/{print $5}' <<<"$out0")
		out=$(twice "${mpi[@]}" "$python" "${pargs[@]}" --threads "$threads")
		p=$(json "$key" <<<"$out")
		q=$(json peak_rss_mib <<<"$out")
		out=$(twice "${mpi[@]}" env LD_PRELOAD="$jemalloc" MALLOC_CONF="$jconf" "$python" "${pargs[@]}" --threads "$threads")
		j=$(json "$key" <<<"$out")
		k=$(json peak_rss_mib <<<"$out")
		# The GPT's bench prints its model FLOP/s over SGEMM 1024^3 on every
		# rank in the same run (MFU): PyTorch's share of that same rate is
		# its throughput over train's times train's share.
		at=$(awk -v t="$t" -v p="$p" -v j="$j" '
			/^# SGEMM/ { sub(/.*once: /, ""); g = $1 }
			/^MFU/ { m = $2 }
			END { if (m != "") printf "; of SGEMM 1024^3 (%s GFLOP/s per rank, same run): train %.2f, PyTorch %.2f, PyTorch+jemalloc %.2f", g, m, m*p/t, m*j/t }' <<<"$out0")
		[[ -n $g2 ]] && x2=", train --gemm $g2 $t2 $unit"
		echo "round $i: train $t $unit (peak RSS $r MiB)$x2, PyTorch $p $unit (peak RSS $q MiB), PyTorch+jemalloc $j $unit (peak RSS $k MiB)$at"
		tt+="$t " pt+="$p " jt+="$j " tr+="$r " pr+="$q " jr+="$k "
		# The round's own ratio: train over the faster PyTorch of the same
		# round (the machine drifts between rounds; a ratio within one is
		# steadier than the ratio of the medians).
		rr+="$(awk -v t="$t" -v p="$p" -v j="$j" 'BEGIN{printf "%.2f", t/(p>j?p:j)}') "
		if [[ -n $g2 ]]; then
			t2s+="$t2 "
			rr2+="$(awk -v t="$t2" -v p="$p" -v j="$j" 'BEGIN{printf "%.2f", t/(p>j?p:j)}') "
		fi
	done
	a=$(median <<<"$tt")
	b=$(median <<<"$pt")
	c=$(median <<<"$jt")
	echo "median $unit: train $a, PyTorch $b, PyTorch+jemalloc $c; train/PyTorch $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", a/b}'), train/(PyTorch+jemalloc) $(awk -v a="$a" -v b="$c" 'BEGIN{printf "%.2f", a/b}'); median peak RSS per rank (MiB): train $(median <<<"$tr"), PyTorch $(median <<<"$pr"), PyTorch+jemalloc $(median <<<"$jr")"
	echo "rounds' train/(faster PyTorch): ${rr% }; median $(median <<<"$rr")"
	if [[ -n $g2 ]]; then
		echo "train --gemm $g2: median $(median <<<"$t2s") $unit, over train's $(awk -v a="$(median <<<"$t2s")" -v b="$a" 'BEGIN{printf "%.2f", a/b}'); rounds' train --gemm $g2/(faster PyTorch): ${rr2% }; median $(median <<<"$rr2")"
	fi
}

echo "# $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, $rounds rounds, T=$T; PyTorch $("$python" -c 'import torch; print(torch.__version__)')"
echo "# CPU: $(awk -F': ' '/^model name/{m=$2} /^cpu family/{f=$2} /^model\t/{n=$2} END{print m", family "f" model "n}' /proc/cpuinfo); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)}"
same_blas "$train"
resnet=(--model resnet --depth 20 --batch-size 64 --steps 20 --warmup 3)
mlp=(--model mlp --hidden 256 --batch-size 64 --steps 2000 --warmup 100)
gpt=(--layers 6 --heads 6 --dim 384 --context 256 --batch-size 4)
# WORKLOADS picks and orders the comparisons (default: all four).
workloads=${WORKLOADS:-im2col winograd mlp gpt}
for np in 1 "$T"; do
	[[ -n ${SCALE_ONLY:-} ]] && break
	th=$T
	[[ $np -gt 1 ]] && th=1
	for w in $workloads; do
		case $w in
		im2col) run "ResNet-20, --conv im2col" "$np" "$th" "${resnet[@]}" --bn local --conv im2col -- "$here/../torch_bench.py" "${resnet[@]}" ;;
		winograd) run "ResNet-20 (Winograd, the default)" "$np" "$th" "${resnet[@]}" --bn local -- "$here/../torch_bench.py" "${resnet[@]}" ;;
		mlp) run "MLP 784-256-10" "$np" "$th" "${mlp[@]}" --bn local -- "$here/../torch_bench.py" "${mlp[@]}" ;;
		gpt) run "GPT" "$np" "$th" --model gpt --data "$data" "${gpt[@]}" --optimizer adamw --lr 6e-4 --beta2 0.95 --weight-decay 0.1 --steps 5 --warmup 1 -- \
			"$here/../torch_gpt.py" bench --data "$data" "${gpt[@]}" --steps 5 --warmup 1 ;;
		*) echo "cpu-vs-torch.sh: WORKLOADS: unknown $w (im2col, winograd, mlp, gpt)" >&2; exit 2 ;;
		esac
	done
done
[[ -n ${COMPARE_ONLY:-} ]] && exit 0

# scale NAME UNIT TRAIN_ARGS: np=1 with 1 thread and with T, interleaved;
# and, in the same rounds, T one-thread processes at once, each bound to
# its own core and sharing nothing: what the machine's T cores give
# together, the bound for a rank's T threads.
scale() {
	local name=$1 unit=$2
	shift 2
	local mpi=(mpirun -np 1 --bind-to none)
	[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
	local one="" many="" apart="" ratios=""
	# rate N: the step's speed with N threads.
	rate() { twice "${mpi[@]}" "$train" bench step "${args[@]}" --threads "$1" | awk -v u="$unit" '$1==u{print $2}'; }
	local args=("$@")
	echo "## $name: np 1, 1 thread against $T threads, and against $T one-thread processes at once"
	# processes: T one-thread processes at once, each bound to its own core.
	processes() {
		for c in $(seq 0 $((T - 1))); do
			taskset -c "$c" "$train" bench step "$@" --threads 1 >"$tmp/apart.$c" &
		done
		wait
		cat "$tmp"/apart.* | awk -v u="$unit" '$1==u{s+=$2} END{printf "%.1f", s}'
	}
	for i in $(seq 1 "$rounds"); do
		# The three runs' order turns round by round (1 thread, T threads,
		# the processes; then T threads, the processes, 1 thread; ...): a
		# machine that drifts through the rounds favours none of them.
		case $((i % 3)) in
		1) a=$(rate 1) b=$(rate "$T") c=$(processes "$@") ;;
		2) b=$(rate "$T") c=$(processes "$@") a=$(rate 1) ;;
		0) c=$(processes "$@") a=$(rate 1) b=$(rate "$T") ;;
		esac
		r=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", b/a}')
		echo "round $i: 1 thread $a $unit, $T threads $b $unit ($r), $T processes at once $c $unit in all"
		one+="$a " many+="$b " apart+="$c " ratios+="$r "
	done
	a=$(median <<<"$one")
	b=$(median <<<"$many")
	c=$(median <<<"$apart")
	echo "median $unit: 1 thread $a, $T threads $b, speed-up $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", b/a}') (target $(awk -v t="$T" 'BEGIN{printf "%.1f", 0.9*t}')); $T processes at once $c, $(awk -v a="$a" -v c="$c" 'BEGIN{printf "%.2f", c/a}') times one"
	echo "rounds' own speed-ups: $ratios; median $(median <<<"$ratios")"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# WORKLOADS picks these too: winograd the ResNet-20 (its default path),
# gpt the GPT; im2col and mlp have none.
if [[ " $workloads " == *" winograd "* ]]; then
	scale "ResNet-20" samples/s "${resnet[@]}" --bn local
fi
if [[ " $workloads " == *" gpt "* ]]; then
	scale "GPT" tokens/s --model gpt --data "$data" "${gpt[@]}" --optimizer adamw --lr 6e-4 --beta2 0.95 --weight-decay 0.1 --steps 5 --warmup 1
fi
