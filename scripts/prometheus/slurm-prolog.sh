#!/usr/bin/env bash
# Slurm PrologSlurmctld (or a job's first step): write the Prometheus
# file_sd targets of a train job, one host:port per rank, for the
# train-slurm job of prometheus.yml. Remove them at the end with
# slurm-epilog.sh. Settings, from the environment:
#   TRAIN_TARGETS_DIR   where Prometheus reads targets (/etc/prometheus/train-targets)
#   TRAIN_METRICS_PORT  --metrics-addr's port (9400)
# Slurm provides SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_JOB_NAME and the
# tasks per node (SLURM_TASKS_PER_NODE, e.g. "4(x2)" or "2,1").
set -euo pipefail
dir=${TRAIN_TARGETS_DIR:-/etc/prometheus/train-targets}
port=${TRAIN_METRICS_PORT:-9400}
mkdir -p "$dir"

# Expand "4(x2),1" into one count per node.
counts=()
IFS=, read -ra groups <<<"${SLURM_TASKS_PER_NODE:-1}"
for g in "${groups[@]}"; do
	if [[ $g =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
		for ((i = 0; i < BASH_REMATCH[2]; i++)); do counts+=("${BASH_REMATCH[1]}"); done
	else
		counts+=("$g")
	fi
done

targets=()
i=0
for host in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
	n=${counts[$i]:-${counts[-1]}}
	for ((r = 0; r < n; r++)); do targets+=("\"$host:$((port + r))\""); done
	i=$((i + 1))
done

tmp=$(mktemp "$dir/.job-$SLURM_JOB_ID.XXXXXX")
printf '[{"targets": [%s], "labels": {"slurm_job_id": "%s", "slurm_job_name": "%s"}}]\n' \
	"$(IFS=,; echo "${targets[*]}")" "$SLURM_JOB_ID" "${SLURM_JOB_NAME:-train}" >"$tmp"
chmod 644 "$tmp"
mv "$tmp" "$dir/job-$SLURM_JOB_ID.json" # atomic: Prometheus never reads half a file
