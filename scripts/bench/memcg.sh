#!/bin/sh
# Runs a command in a memory cgroup of its own, limited to LIMIT bytes
# (cgroup v2 memory.max, or v1 memory.limit_in_bytes), created under this
# process's cgroup: what memlimit.sh and zero.sh put each rank in.
#   scripts/bench/memcg.sh LIMIT CMD [ARG...]
#   scripts/bench/memcg.sh --check     # says why not, exit 1, where cgroups cannot be made
#   scripts/bench/memcg.sh --clean     # removes the cgroups made under this one
set -eu
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	base=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
	file=memory.max
else
	base=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
	file=memory.limit_in_bytes
fi
case $1 in
--check)
	[ -w "$base" ] || { echo "cannot create cgroups under $base (run as root on a machine whose cgroups are writable)"; exit 1; }
	exit 0
	;;
--clean)
	rmdir "$base"/train-memcg-* 2>/dev/null || true
	exit 0
	;;
esac
limit=$1
shift
cg=$base/train-memcg-$$
mkdir "$cg" && echo "$limit" >"$cg/$file"
echo 0 >"$cg/memory.swappiness" 2>/dev/null || true
echo $$ >"$cg/cgroup.procs"
exec "$@"
