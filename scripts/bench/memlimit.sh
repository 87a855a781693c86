#!/bin/sh
# A GPT too big for one rank under a per-rank memory limit trains when
# split (issue 16, must-show 3): every rank runs in a memory cgroup of its
# own with LIMIT bytes (cgroup v2 memory.max, or v1 memory.limit_in_bytes,
# under this shell's cgroup; needs root), at np=1 and at --pipeline 4 and
# --tensor-parallel 4. The split runs write a sharded checkpoint (each part
# its own file, no gathering) and resume from it for one more step, under
# the same limit.
#   scripts/bench/memlimit.sh DATA [TRAIN] [LIMIT]
# DATA: token shards (train tokenize); TRAIN: the binary (./train); LIMIT:
# bytes per rank (default 1 GiB).
set -eu
data=$1
train=$(realpath "${2:-./train}")
limit=${3:-1073741824}
mpi="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
memcg=$(dirname "$(realpath "$0")")/memcg.sh
"$memcg" --check || { echo "memlimit.sh: $("$memcg" --check)"; exit 1; }
wrap="$memcg $limit"
tmp=$(mktemp)
g="--model gpt --data $data --layers 8 --heads 8 --dim 1024 --context 32 --optimizer adamw --lr 1e-3 --batch-size 4 --micro-batches 4 --eval-batch 4 --max-steps 3 --log-every 1"
echo "## gpt 8 layers, dim 1024, context 32, AdamW: $(($limit / 1048576)) MiB per rank"
for grid in "" "--pipeline 4" "--tensor-parallel 4"; do
	np=1
	[ -n "$grid" ] && np=4
	echo "### np=$np $grid"
	ck=""
	[ -n "$grid" ] && ck="--checkpoint-dir $tmp.ck$np$(echo $grid | tr -dc a-z) --checkpoint-format sharded"
	set +e
	$mpi -np $np $wrap "$train" $g $grid $ck >"$tmp.out" 2>&1
	rc=$?
	set -e
	grep -E '^train: gpt|^grid:|^done|killed|Killed|signal' "$tmp.out" | sed 's/; idle.*//' | head -8
	echo "exit $rc"
	if [ -n "$grid" ]; then
		echo "#### resumed from the sharded checkpoint, one more step"
		set +e
		$mpi -np $np $wrap "$train" $g $grid $ck --resume --max-steps 4 >"$tmp.out" 2>&1
		rc=$?
		set -e
		grep -E '^resume:|^grid:|^done|killed|Killed|signal' "$tmp.out" | sed 's/; idle.*//' | head -8
		echo "exit $rc"
		rm -rf "$tmp".ck*
	fi
done
"$memcg" --clean
rm -f "$tmp" "$tmp.out"
