#!/bin/bash
# The GPT on one GPU against PyTorch on the same GPU, in one run (issue 21):
# GPT-2 124M (12 layers, 12 heads, width 768, context 1024) on GPT-2 token
# shards, AdamW, the same batch; rounds alternate ours, PyTorch eager and
# PyTorch torch.compile (both with F.scaled_dot_product_attention, as a
# PyTorch user writes it), and the medians give tokens/s, the ratios, MFU
# against the GPU's bf16 dense peak, and peak device memory.
#
#   scripts/bench/gpt-gpu-vs-torch.sh DATA [TRAIN_BINARY]   (default .gpu/train)
#   env: BATCH (8), STEPS (20), ROUNDS (3), PRECISION (fp32; bf16), PEAK_TFLOPS (989: H100 SXM bf16 dense)
set -euo pipefail
cd "$(dirname "$0")/../.."
data=${1:?usage: $0 DATA [TRAIN_BINARY]}
bin=${2:-.gpu/train}
B=${BATCH:-8} S=${STEPS:-20} R=${ROUNDS:-3} P=${PRECISION:-fp32} peak=${PEAK_TFLOPS:-989}
gpt=(--layers 12 --heads 12 --dim 768 --context 1024 --batch-size "$B")
mpi=(mpirun -np 1)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
declare -A tok mem
flops=
for r in $(seq "$R"); do
	out=$("${mpi[@]}" "$bin" bench step --device cuda --precision "$P" --model gpt --data "$data" "${gpt[@]}" \
		--optimizer adamw --lr 6e-4 --beta2 0.95 --weight-decay 0.1 --steps "$S" --warmup 3)
	tok[ours]+="$(awk '/^tokens\/s/ {print $2}' <<<"$out") "
	mem[ours]+="$(grep -io 'peak device[^0-9]*[0-9.,]*' <<<"$out" | grep -o '[0-9.,]*$' | tr -d , | head -1) "
	flops=$(grep -o '= [0-9.]* MFLOP per token' <<<"$out" | grep -o '[0-9.]*' | head -1)
	for mode in eager compile; do
		c=()
		[ $mode = compile ] && c=(--compile)
		j=$(python3 scripts/torch_gpt.py bench --device cuda --sdpa --precision "$P" "${c[@]}" --data "$data" "${gpt[@]}" \
			--steps "$S" --warmup 3 | tail -1)
		tok[$mode]+="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tokens_per_s"])' "$j") "
		mem[$mode]+="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["peak_device_mib"])' "$j") "
	done
	echo "round $r: ours $(awk '{print $NF}' <<<"${tok[ours]}") eager $(awk '{print $NF}' <<<"${tok[eager]}") compile $(awk '{print $NF}' <<<"${tok[compile]}")"
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
o=$(median "${tok[ours]}")
printf '%-10s %14s %10s %8s %18s\n' "" "tokens/s" "vs ours" "MFU" "peak device MiB"
for k in ours eager compile; do
	t=$(median "${tok[$k]}")
	awk -v k="$k" -v t="$t" -v o="$o" -v f="${flops:-0}" -v p="$peak" -v m="$(median "${mem[$k]}")" \
		'BEGIN {printf "%-10s %14.0f %10.2f %8.3f %18s\n", k, t, o / t, t * f / 1e6 / p, m}' 
done
echo "medians of $R rounds; batch $B x 1024 tokens, $S timed steps after 3, precision $P; MFU at ${flops:-?} MFLOP per token over $peak TFLOP/s"
