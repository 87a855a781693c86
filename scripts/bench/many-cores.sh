#!/usr/bin/env bash
# Issue 18's measurements that need more cores than this project's 2-core
# machines, for the GPU machine's 16 (../shared/GPU.md: no Go, no network,
# and neither Debian's OpenBLAS nor jemalloc, so both travel with the
# binary):
#
#   scripts/gpu-check.sh build && scripts/bench/many-cores.sh pack   # here
#   scripts/bench/many-cores.sh run PART...                         # there
#
# pack adds to .gpu/ the libraries (OpenBLAS as Debian builds it, with
# libgfortran and libquadmath, and jemalloc for PyTorch's runs) and the
# GPT's tokens (TOKENS, default /tmp/kjv: `train tokenize` of the King
# James Bible, as gpt-kjv.sh makes it). run puts the libraries on
# LD_LIBRARY_PATH and runs each PART in turn, each cut off at its own
# limit so that one slow part cannot take the others' time, writing
# $OUT/many-cores-PART.txt as it goes:
#
#   probe      the cores, the BLAS train loads, PyTorch's version; on AMX
#              cores scripts/bench/amx-swing.c (whether AMX's rate on data
#              swings there as on this project's VM; about 10 s)
#   allreduce  train bench allreduce at np 2 and 4, 1 MB to 256 MB: shm,
#              the ring and MPI_Allreduce in one run, memcpy beside them
#   scale16    cpu-vs-torch.sh's scaling part at T = 16 (ResNet-20, GPT:
#              1 thread, 16 threads, 16 one-thread processes at once)
#   scale8     the same at T = 8
#   passes16   train bench step --passes at 1 and 16 threads, ResNet-20 (at
#              batch 64 and 256) and the GPT: where the 16 threads' time
#              goes, pass by pass, each pass's tail spent waiting, the
#              threads' summed time in their chunks (busy) and how late the
#              workers started (late)
#   pool       the pool's own cost a pass at 1 to 16 threads (model.test's
#              BenchmarkPass: passes whose units do nothing, each row beside
#              its take-unread twin, three rounds; seconds); beside it, in
#              each round, the same of the commit POOL_BASE names, where
#              pack had POOL_BASE set
#   amx16      --gemm amx against blas, A B A B, 2 rounds: the GPT at 16
#              threads, at 1, and at np=2 with 1 each; ResNet-20 at 16
#              (model/gemm_amx.c: this project's 2-vCPU Emerald Rapids VM
#              could not tell, its AMX rate swinging 2x from run to run;
#              the GPU machine's cores are Emerald Rapids too). The
#              comparisons with PyTorch take it too: TRAIN_GEMM=amx before
#              `run torch2` (train reads its options from TRAIN_*).
#   avx16      the same for --gemm avx512 against blas (model/gemm_avx512.c:
#              1.04 to 1.07 times OpenBLAS on the GPT's shapes on one
#              core of the VM; at 16 threads each thread packs its own B)
#   torch2     cpu-vs-torch.sh's comparisons at T = 2 (np=1 with 2
#              threads, np=2), ResNet-20 (Winograd) and the GPT
#   torch16    the same at T = 16
#   gpucheck   scripts/gpu-check.sh run, its record in $OUT/gpu/record.md
#              and its logs in $OUT/gpu/gpu-logs.tgz
#
# The next device run, as planned (packed with POOL_BASE=2bf1cd8, the pool
# before its hand-off's variables had lines of their own; carry .gpu; one
# command of at most 600 s, the parts in this order fit 510 s of limits), then, if the session's
# device time allows, `TRAIN_GEMM2=avx512 scripts/bench/many-cores.sh run
# avx16 torch2` (430 s: --gemm avx512 against blas, and both against
# PyTorch 2.11 in one run; torch16 and torch2 were cut at 150 s each on
# 2026-11-30 before their np=16 and np=2 workloads, now 280; amx16, scale8
# and allreduce ran on 2026-11-30, docs/cores/2026-11-30-730015f.md):
#   scripts/bench/many-cores.sh run probe pool passes16 scale16
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=$PWD/.gpu

case "${1:-}" in
pack)
	[[ -x $bin/train ]] || { echo "many-cores.sh: no $bin/train: run scripts/gpu-check.sh build first" >&2; exit 1; }
	tokens=${TOKENS:-/tmp/kjv}
	[[ -f $tokens/tokenizer.json ]] || { echo "many-cores.sh: no tokens in $tokens: set TOKENS to a train tokenize --out directory" >&2; exit 1; }
	d=$(mktemp -d)
	trap 'rm -rf "$d"' EXIT
	for l in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libjemalloc.so.2; do
		cp -L "/usr/lib/x86_64-linux-gnu/$l" "$d/" || exit 1
	done
	# Compressed: the carry to the GPU machine holds 64 MiB in all, and
	# OpenBLAS alone is 36 MB.
	tar czf "$bin/lib.tgz" -C "$d" . || exit 1
	rm -f "$d"/*
	rm -rf "$bin/kjv" && cp -r "$tokens" "$bin/kjv" || exit 1
	# AMX's rate on data against the FMA units', round by round (probe).
	gcc -O2 -march=sapphirerapids scripts/bench/amx-swing.c -o "$bin/amx-swing" || exit 1
	# The pool's own cost a pass (part pool): the model package's tests,
	# run there for its benchmark alone.
	go test -c -trimpath -ldflags='-s -w' -o "$d/model.test" ./model || exit 1
	# POOL_BASE (a commit): the same benchmark of that commit's pool, for
	# part pool to run beside this one's. Both compressed (6.4 MB each,
	# 5.4 together), for the carry's 64 MiB.
	if [[ -n ${POOL_BASE:-} ]]; then
		w=$(mktemp -d)
		git worktree add -q --detach "$w" "$POOL_BASE" || exit 1
		(cd "$w" && go test -c -trimpath -ldflags='-s -w' -o "$d/model-base.test" ./model) || exit 1
		git worktree remove --force "$w"
	fi
	rm -f "$bin/model.test" "$bin/model-base.test"
	tar czf "$bin/model-tests.tgz" -C "$d" . || exit 1
	du -sh "$bin"
	exit 0
	;;
run) shift ;;
*)
	echo "usage: scripts/bench/many-cores.sh pack | run PART..." >&2
	exit 2
	;;
esac

out=${OUT:-$(mktemp -d)}
lib=$(mktemp -d)
trap 'rm -rf "$lib"' EXIT
mkdir -p "$out" && tar xzf "$bin/lib.tgz" -C "$lib" && tar xzf "$bin/model-tests.tgz" -C "$lib" || exit 1
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} TRAIN_METRICS_ADDR=
export TRAIN_BIN=$bin/train JEMALLOC=$lib/libjemalloc.so.2 PYTHON=${PYTHON:-$(command -v python3)}
mpi=(mpirun --oversubscribe)
[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)

part() {
	case $1 in
	probe)
		echo "commit $(cat "$bin/commit" 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
		lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node|L2|L3)'
		echo "AMX: $(grep -o -w 'amx_[a-z0-9]*' /proc/cpuinfo | sort -u | paste -sd' ')"
		if grep -qw amx_bf16 /proc/cpuinfo && [[ -x $bin/amx-swing ]]; then
			echo "## amx-swing 20 (scripts/bench/amx-swing.c)"
			"$bin/amx-swing" 20
		fi
		free -g | head -2
		"$PYTHON" -c 'import torch; print("PyTorch", torch.__version__, "threads", torch.get_num_threads())'
		"$bin/train" bench step --model resnet --depth 20 --steps 3 --warmup 1 --threads 1 --openblas "$lib/libopenblas.so.0" | head -4
		;;
	allreduce)
		for np in 2 4; do
			echo "## mpirun -np $np train bench allreduce -b 1M -e 256M -f 4 -n 10 -w 3"
			"${mpi[@]}" -np "$np" "$bin/train" bench allreduce -b 1M -e 256M -f 4 -n 10 -w 3
		done
		;;
	pool)
		# Three times over, so that each row and its take-unread twin
		# (the pool before the 49th session's read-before-take) alternate
		# A B A B with the machine's drift; with pack's POOL_BASE, that
		# commit's pool beside this one's, turn and turn about.
		tests=("$lib/model.test")
		[[ -x $lib/model-base.test ]] && tests+=("$lib/model-base.test")
		for round in 1 2 3; do
			order=("${tests[@]}")
			((round % 2 == 0 && ${#tests[@]} == 2)) && order=("${tests[1]}" "${tests[0]}")
			for t in "${order[@]}"; do
				echo "## round $round: ${t##*/}"
				"$t" -test.run '^$' -test.bench BenchmarkPass -test.benchtime 20000x
			done
		done
		;;
	scale16) SCALE_ONLY=1 scripts/bench/cpu-vs-torch.sh 3 "$bin/kjv" 16 ;;
	scale8) SCALE_ONLY=1 scripts/bench/cpu-vs-torch.sh 2 "$bin/kjv" 8 ;;
	passes16)
		for t in 1 16; do
			a=(--model resnet --depth 20 --bn local --warmup 20 --steps 100 --threads "$t" --passes)
			echo "## train bench step ${a[*]}"
			"$bin/train" bench step "${a[@]}"
		done
		# Batch 256: the simulation's claim that 64 images are too few
		# for 16 threads (docs/cpu-speed.md, the 38th session) against real cores.
		for t in 1 16; do
			a=(--model resnet --depth 20 --bn local --batch-size 256 --warmup 3 --steps 20 --threads "$t" --passes)
			echo "## train bench step ${a[*]}"
			"$bin/train" bench step "${a[@]}"
		done
		for t in 1 16; do
			a=(--model gpt --data "$bin/kjv" --layers 6 --heads 6 --dim 384 --context 256 --batch-size 4 --optimizer adamw --lr 6e-4 --beta2 0.95 --weight-decay 0.1 --steps 4 --warmup 1 --threads "$t" --passes)
			echo "## train bench step ${a[*]}"
			"$bin/train" bench step "${a[@]}"
		done
		;;
	amx16) gemm_ab amx ;;
	avx16) gemm_ab avx512 ;;
	torch2) COMPARE_ONLY=1 WORKLOADS="winograd gpt" scripts/bench/cpu-vs-torch.sh 2 "$bin/kjv" 2 ;;
	torch16) COMPARE_ONLY=1 WORKLOADS="winograd gpt" scripts/bench/cpu-vs-torch.sh 2 "$bin/kjv" 16 ;;
	gpucheck) OUT=$out/gpu scripts/gpu-check.sh run "$bin" ;;
	*) echo "many-cores.sh: unknown part $1" ;;
	esac
}
# gemm_ab G: --gemm G against blas, A B A B, 2 rounds: the GPT at 16
# threads, at 1, and at np=2 with 1 each; ResNet-20 at 16.
gemm_ab() {
	local G=$1
	gpt=(--model gpt --data "$bin/kjv" --layers 6 --heads 6 --dim 384 --context 256 --batch-size 4 --optimizer adamw --lr 6e-4 --beta2 0.95 --weight-decay 0.1 --warmup 1)
	for round in 1 2; do
		for run in "16 --steps 6" "1 --steps 3"; do
			set -- $run
			for g in blas "$G"; do
				echo "## round $round: train bench step GPT --threads $1 $2 $3 --gemm $g"
				"$bin/train" bench step "${gpt[@]}" --threads "$1" "$2" "$3" --gemm "$g" | grep -E '^(#.*blas|tokens/s|ms/step|peak)'
			done
		done
		for g in blas "$G"; do
			echo "## round $round: mpirun -np 2 train bench step GPT --threads 1 --steps 3 --gemm $g"
			"${mpi[@]}" -np 2 "$bin/train" bench step "${gpt[@]}" --threads 1 --steps 3 --gemm "$g" | grep -E '^(tokens/s|ms/step|peak)'
		done
		for g in blas "$G"; do
			echo "## round $round: train bench step ResNet-20 --threads 16 --gemm $g"
			"$bin/train" bench step --model resnet --depth 20 --bn local --warmup 10 --steps 50 --threads 16 --gemm "$g" | grep -E '^(samples/s|ms/step|peak)'
		done
	done
}
declare -A limit=([probe]=60 [pool]=90 [amx16]=150 [avx16]=150 [allreduce]=120 [scale16]=180 [scale8]=120 [passes16]=180 [torch2]=280 [torch16]=280 [gpucheck]=240)
# timeout runs each part in a child bash: export the function's needs.
export -f part gemm_ab
export bin lib out
for p in "$@"; do
	echo "== $p (at most ${limit[$p]:-60} s)"
	start=$SECONDS
	timeout "${limit[$p]:-60}" bash -c "mpi=(${mpi[*]}); part $p" 2>&1 | tee "$out/many-cores-$p.txt"
	echo "== $p: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s"
done
