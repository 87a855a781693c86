#!/bin/sh
# Pipeline and tensor-parallel memory and idle time (issue 16), from the
# "grid:" lines train prints at the end of a split run.
#   scripts/bench/pipeline.sh DATA [TRAIN]
# DATA: token shards (train tokenize); TRAIN: the binary (./train).
# Part 1: GPT (16 layers, dim 128, context 64) at P=2, 2 samples per
# micro-batch, M = 1, 4, 16, GPipe and 1F1B: idle fraction per stage
# against (P-1)/(M+P-1), and activation bytes held. Sixteen layers, so
# that the head's extra work on the last stage is small beside 8 blocks
# (the cut is by whole layers): the bubble is then the schedule's alone.
# Part 2: GPT (8 layers, dim 128, 4 heads, context 64) at P = 2, 4 and
# T = 2, 4: parameter, optimizer and activation bytes per rank.
set -eu
data=$1
train=${2:-./train}
mpi="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
g="--model gpt --data $data --optimizer adamw --lr 3e-3 --log-every 1000 --max-steps 20"
echo "## bubble: gpt 16 layers, dim 128, context 64, P=2, 2 samples per micro-batch, 30 steps"
for m in 1 4 16; do
	for s in gpipe 1f1b; do
		echo "### M=$m $s"
		$mpi -np 2 "$train" $g --layers 16 --heads 4 --dim 128 --context 64 --pipeline 2 --micro-batches $m \
			--max-steps 30 --batch-size $((2 * m)) --eval-batch 2 --schedule $s | grep '^grid:'
	done
done
echo "## memory: gpt 8 layers, dim 128, 4 heads, context 64, batch 8, 4 micro-batches"
$mpi -np 1 "$train" $g --layers 8 --heads 4 --dim 128 --context 64 --batch-size 8 --eval-batch 8 --max-steps 2 | grep '^train: gpt'
for grid in "--pipeline 2" "--pipeline 4" "--tensor-parallel 2" "--tensor-parallel 4" "--pipeline 2 --tensor-parallel 2"; do
	np=$(echo "$grid" | awk '{p=1; for (i=1;i<=NF;i++) if ($i ~ /^[0-9]+$/) p*=$i; print p}')
	echo "### $grid (np=$np)"
	$mpi -np "$np" "$train" $g --layers 8 --heads 4 --dim 128 --context 64 --batch-size 8 --micro-batches 4 --eval-batch 2 --max-steps 5 $grid | grep '^grid:\|^pipeline:'
done
