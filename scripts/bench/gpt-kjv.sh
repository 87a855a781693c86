#!/usr/bin/env bash
# The convergence check of issue 15: the 6-layer, 384-wide GPT with
# context 256 and GPT-2's BPE on the King James Bible, trained on 2 ranks by
# train and by PyTorch (2 DDP processes, scripts/torch_gpt.py) from the same
# initial weights (train init), on the same windows in the same order,
# with the same hyperparameters, for the same number of tokens; then both
# validation curves on one plot and a sample of the text.
#
#   scripts/bench/gpt-kjv.sh OUT [STEPS]     (STEPS 512 = 1,048,576 tokens)
#
# Writes OUT/train.jsonl, OUT/torch.jsonl, OUT/kjv.png, OUT/sample.txt and
# OUT/summary.txt. Takes about an hour here: train's run, then PyTorch's.
set -euo pipefail
out=${1:?usage: gpt-kjv.sh OUT [STEPS]}
steps=${2:-512}
here=$(dirname "$(realpath "$0")")
train=$(realpath "${TRAIN_BIN:-$here/../../train}")
mkdir -p "$out"
out=$(realpath "$out")
mpi=(mpirun -np 2 --oversubscribe)
[[ $EUID -eq 0 ]] && mpi+=(--allow-run-as-root)
export TRAIN_METRICS_ADDR=
data=$out/kjv
if [[ ! -f $data/tokenizer.json ]]; then
	bible -f Gen1:1-Rev22:21 >"$out/kjv.txt"
	"$train" tokenize --out "$data" "$out/kjv.txt"
fi
sizes=(--layers 6 --heads 6 --dim 384 --context 256)
hyper=(--batch-size 4 --lr 6e-4 --warmup-steps "${WARMUP:-50}" --lr-decay-steps "$steps" --max-steps "$steps" --weight-decay 0.1
	--beta1 0.9 --beta2 0.95 --eps 1e-8 --clip-grad-norm 1.0 --seed 1)
"$train" init --model gpt "${sizes[@]}" --data "$data" --seed 1 -o "$out/init.safetensors"
echo "# train: $(date -u +%FT%TZ)"
start=$(date +%s)
"${mpi[@]}" "$train" --model gpt "${sizes[@]}" --data "$data" --optimizer adamw "${hyper[@]}" \
	--init-from "$out/init.safetensors" --eval-every 32 --log-every 8 --eval-batch 16 \
	--log-file "$out/train.jsonl" --checkpoint-dir "$out/ck" --keep 1 --progress never | tee "$out/train.log"
t1=$(( $(date +%s) - start ))
echo "# PyTorch: $(date -u +%FT%TZ)"
start=$(date +%s)
"${mpi[@]}" /usr/bin/python3 "$here/../torch_gpt.py" train --data "$data" "${sizes[@]}" --init "$out/init.safetensors" \
	"${hyper[@]}" --threads 1 --eval-every 32 --log-every 8 --log-file "$out/torch.jsonl" | tee "$out/torch.log"
t2=$(( $(date +%s) - start ))
"$train" plot "$out/train.jsonl" "$out/torch.jsonl" -o "$out/kjv.png"
"$train" generate --checkpoint "$out/ck" --prompt "And God said" --tokens 100 --temperature 0.8 --top-k 40 --seed 1 >"$out/sample.txt"
last() { python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; e=[x for x in r if x["type"] in ("eval","epoch") and "test_loss" in x]; print("%.4f at step %d" % (e[-1]["test_loss"], e[-1]["step"]))' "$1"; }
{
	echo "tokens: $((steps * 2 * 4 * 256)) ($steps steps of 2 ranks x 4 windows x 256)"
	echo "train:   final val loss $(last "$out/train.jsonl"), $t1 s"
	echo "PyTorch: final val loss $(last "$out/torch.jsonl"), $t2 s"
} | tee "$out/summary.txt"
