# Sourced by the benchmarks that run PyTorch beside train on the CPU
# (cpu-vs-torch.sh, gpt-vs-torch.sh, resnet50-vs-torch.sh): both sides'
# matrix products are OpenBLAS's (PyTorch's CPU linear layers go through
# Debian's libblas.so.3, OpenBLAS here; its convolutions are oneDNN's).
#
# Where Debian's OpenBLAS 0.3.21 does not know the CPU (Emerald Rapids,
# family 6 model 207; the GPU machine's host) it falls back to its
# Prescott (SSE3) kernels, and train loads it again with the kernels the
# CPU's features call for (openblas.betterCore). PyTorch would keep
# Prescott's and run its linear layers 2.5 times slower (the GPT at 2
# threads on an Emerald Rapids core, 2026-11-29: 238 and 221 tokens/s
# against 620 and 517 with OPENBLAS_CORETYPE=Cooperlake), which no user
# tuning a run would accept. So, with OPENBLAS_CORETYPE unset, same_blas
# asks train which kernels it loaded and exports them to both sides, and
# says so on stdout. A variable the caller set is left as it is.
#
#   same_blas TRAIN_BINARY
same_blas() {
	[[ -z ${OPENBLAS_CORETYPE+x} ]] || return 0
	local probe core
	probe=$(TRAIN_METRICS_ADDR= "$1" bench step --model mlp --steps 1 --warmup 0 --threads 1 2>&1) || {
		echo "same_blas: $1 bench step failed: $probe" >&2
		return 1
	}
	[[ $probe == *"did not know this CPU"* ]] || return 0
	# train's header: "blas: OpenBLAS Cooperlake (OpenBLAS did not know this CPU ...".
	core=$(sed -n 's/.*blas: OpenBLAS \([A-Za-z0-9]*\) (OpenBLAS did not know.*/\1/p' <<<"$probe" | head -1)
	[[ -n $core ]] || {
		echo "same_blas: cannot read the kernels train loaded from: $probe" >&2
		return 1
	}
	export OPENBLAS_CORETYPE=$core
	echo "# OpenBLAS fell back to Prescott's kernels on this CPU; train loads $core's, so both sides run with OPENBLAS_CORETYPE=$core"
}
