#!/usr/bin/env bash
# Where a rank's threads lose their time, pass by pass: `train bench step
# --passes` of one build at A threads and at B, interleaved (A B A B:
# this project's machines are shared and noisy), and per task (a kind of
# pass of model/par.c's pool, its unit counts summed) the ms per step at
# each, the speed-up, the time lost against perfect scaling (ms at B
# minus ms at A times A/B), the tail the caller waited at B, the work its
# threads did at B against A's (their summed time in the pass's chunks,
# "busy": 1.00 when a thread count adds no work) and how late a worker
# started at B (us a pass); then the same for the whole step and for the
# time outside the passes (Go code and C calls that one thread runs
# alone). Sums over the rounds.
#
#   scripts/bench/passes.sh TRAIN A B ROUNDS [bench step options...]
#   scripts/bench/passes.sh ./train 1 2 2 --model resnet --depth 20 --bn local --warmup 20 --steps 100
set -euo pipefail
bin=${1:?usage: passes.sh TRAIN A B ROUNDS [bench step options...]}
a=${2:?} b=${3:?} rounds=${4:?}
shift 4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for i in $(seq 1 "$rounds"); do
	for t in "$a" "$b"; do
		"$bin" bench step "$@" --threads "$t" --passes >"$dir/$t.$i"
		echo "round $i, $t thread(s): $(awk '/^samples\/s/{s=$2} /^ms\/step/{m=$2} END{print s " samples/s, " m " ms/step"}' "$dir/$t.$i")"
	done
done
awk -v a="$a" -v b="$b" '
FNR == 1 { split(FILENAME, p, "/"); split(p[length(p)], q, "."); t = q[1]; runs[t]++ }
/^ms\/step/ { step[t] += $2 }
/^# --passes/ { for (i = 1; i <= NF; i++) if ($i == "outside") out[t] += $(i - 1) }
$1 == "#" && NF == 9 && $7 ~ /%$/ && $2 != "task" { ms[t, $2] += $5; wt[t, $2] += $6; bs[t, $2] += $8; lt[t, $2] += $9 * $4; np[t, $2] += $4; tasks[$2] = 1 }
END {
	r = b / a
	printf "%-22s %10s %10s %8s %9s %10s %7s %8s\n", "task", a " thr ms", b " thr ms", "speed-up", "lost ms", "waited ms", "work x", "late us"
	n = 0
	for (k in tasks) {
		x = ms[a, k] / runs[a]; y = ms[b, k] / runs[b]
		lost[k] = y - x / r
		row[k] = sprintf("%-22s %10.3f %10.3f %8.2f %9.3f %10.3f %7.2f %8.1f", k, x, y, y > 0 ? x / y : 0, lost[k], wt[b, k] / runs[b],
			bs[a, k] > 0 ? (bs[b, k] / runs[b]) / (bs[a, k] / runs[a]) : 0, np[b, k] > 0 ? lt[b, k] / np[b, k] : 0)
		keys[++n] = k
	}
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (lost[keys[j]] > lost[keys[i]]) { s = keys[i]; keys[i] = keys[j]; keys[j] = s }
	for (i = 1; i <= n; i++) print row[keys[i]]
	x = out[a] / runs[a]; y = out[b] / runs[b]
	printf "%-22s %10.3f %10.3f %8.2f %9.3f\n", "(outside the passes)", x, y, (y > 0 ? x / y : 0), y - x / r
	x = step[a] / runs[a]; y = step[b] / runs[b]
	printf "%-22s %10.3f %10.3f %8.2f %9.3f\n", "(the step)", x, y, x / y, y - x / r
}' "$dir"/*
