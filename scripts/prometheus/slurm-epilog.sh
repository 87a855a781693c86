#!/usr/bin/env bash
# Slurm EpilogSlurmctld: remove the targets slurm-prolog.sh wrote.
set -euo pipefail
rm -f "${TRAIN_TARGETS_DIR:-/etc/prometheus/train-targets}/job-$SLURM_JOB_ID.json"
