#!/usr/bin/env bash
# Entry point of the train image. In the launcher pod of an MPIJob
# (K_MPI_JOB_ROLE=launcher, set by the MPI Operator) it waits until every
# worker in the hostfile resolves, since worker DNS records appear a little
# after the pods, then runs the command (mpirun ...). MPI_HOSTFILE and
# TRAIN_DNS_WAIT (seconds, 60) override the hostfile and the wait.
set -euo pipefail
hostfile=${MPI_HOSTFILE:-/etc/mpi/hostfile}
wait_s=${TRAIN_DNS_WAIT:-60}
if [[ ${K_MPI_JOB_ROLE:-} == launcher && -f $hostfile ]]; then
	for host in $(cut -d ' ' -f 1 "$hostfile" | cut -d : -f 1); do
		for ((i = 1; ; i++)); do
			getent hosts "$host" >/dev/null && break
			if ((i >= wait_s)); then
				echo "entrypoint: worker $host in $hostfile does not resolve after $wait_s s" >&2
				exit 1
			fi
			sleep 1
		done
	done
fi
exec "$@"
