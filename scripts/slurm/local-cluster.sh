#!/usr/bin/env bash
# A private single-node Slurm cluster in a directory, for tests and for
# trying train.sbatch on a workstation: munged, slurmctld and slurmd run in
# the foreground of background processes (no systemd), as root, on ports of
# their own; nothing outside DIR is touched.
#
#   scripts/slurm/local-cluster.sh start DIR   start; prints the line to eval
#   scripts/slurm/local-cluster.sh stop DIR    stop the daemons by their pids
#
#   eval "$(scripts/slurm/local-cluster.sh start /tmp/slurm)"
#   sbatch --wait scripts/slurm/train.sbatch --epochs 1
#   scripts/slurm/local-cluster.sh stop /tmp/slurm
#
# Settings: SLURMCTLD_PORT (6917) and SLURMD_PORT (6918). Needs Debian's
# slurm-wlm and munge (scripts/setup.sh --test installs them).
set -euo pipefail

cmd=${1:-}
base=${2:-}
if [[ -z $cmd || -z $base ]]; then
	echo "usage: $0 start|stop DIR" >&2
	exit 2
fi
base=$(realpath -m "$base")

stop() {
	local name pid
	for name in slurmd slurmctld munged; do
		[[ -f $base/$name.pid ]] || continue
		pid=$(<"$base/$name.pid")
		if kill "$pid" 2>/dev/null; then
			for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -9 "$pid" 2>/dev/null || true
		fi
		rm -f "$base/$name.pid"
	done
}

if [[ $cmd == stop ]]; then
	stop
	exit 0
fi
[[ $cmd == start ]] || { echo "$0: unknown command $cmd: use start or stop" >&2; exit 2; }

for b in munged slurmctld slurmd sinfo; do
	command -v "$b" >/dev/null || PATH=$PATH:/usr/sbin
	command -v "$b" >/dev/null || { echo "$0: $b not found: apt-get install slurm-wlm munge (or scripts/setup.sh --test)" >&2; exit 1; }
done
if [[ $EUID -ne 0 ]]; then
	echo "$0: run as root: slurmd starts jobs as their users" >&2
	exit 1
fi

mkdir -p "$base"/{munge,state,spool,log}
chmod 755 "$base/munge"
# munged refuses a socket that not everyone can reach.
d=$base
while [[ $d != / ]]; do
	if [[ $(($(stat -c %#a "$d") & 1)) -eq 0 ]]; then
		echo "$0: $d is not searchable by all (o+x), which munged needs for its socket: chmod o+x $d or choose another DIR" >&2
		exit 1
	fi
	d=$(dirname "$d")
done
trap 'stop' ERR
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
sock=$base/munge/munge.socket

if [[ ! -f $base/munge.key ]]; then
	head -c 1024 /dev/urandom >"$base/munge.key"
	chmod 0400 "$base/munge.key"
fi
munged -F --socket="$sock" --key-file="$base/munge.key" --pid-file="$base/munge/munged.pid" \
	--log-file="$base/log/munged.log" --seed-file="$base/munge/seed" >>"$base/log/munged.out" 2>&1 &
echo $! >"$base/munged.pid"
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
[[ -S $sock ]] || { echo "$0: munged did not start: $(tail -n 1 "$base/log/munged.out")" >&2; false; }

cat >"$base/slurm.conf" <<CONF
ClusterName=train-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${SLURMCTLD_PORT:-6917}
SlurmdPort=${SLURMD_PORT:-6918}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$base/state
SlurmdSpoolDir=$base/spool
SlurmctldPidFile=$base/slurmctld.daemon.pid
SlurmdPidFile=$base/slurmd.daemon.pid
SlurmctldLogFile=$base/log/slurmctld.log
SlurmdLogFile=$base/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
MinJobAge=4
KillWait=20
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$base/slurm.conf

slurmctld -D -i >>"$base/log/slurmctld.out" 2>&1 &
echo $! >"$base/slurmctld.pid"
slurmd -D >>"$base/log/slurmd.out" 2>&1 &
echo $! >"$base/slurmd.pid"
for _ in $(seq 300); do
	[[ $(sinfo -h -o %T 2>/dev/null) == idle ]] && break
	sleep 0.1
done
if [[ $(sinfo -h -o %T 2>/dev/null) != idle ]]; then
	echo "$0: the node did not become idle; see $base/log" >&2
	false
fi
echo "export SLURM_CONF=$base/slurm.conf"
