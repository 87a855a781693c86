#!/usr/bin/env bash
# cluster.sh: several "hosts" on one machine, for multi-host MPI runs in
# tests: each host is a network namespace with one veth into a shared
# bridge, its link shaped with tc htb, all on a private subnet used only
# inside them. Needs root (or CAP_NET_ADMIN) and iproute2.
#
#   cluster.sh up DIR HOSTS [RATE] [SLOTS]   make HOSTS hosts (RATE: tc rate of each host's
#                                            link, e.g. 1gbit, "" for none; SLOTS per host)
#   cluster.sh down DIR                      remove everything up made (also after a failure)
#   cluster.sh check DIR                     exit 1 if anything of DIR's cluster is left
#
# up writes into DIR:
#   hostfile      one "ADDRESS slots=SLOTS" line per host, for mpirun --hostfile
#   agent         mpirun's launch agent (--mca plm_rsh_agent): runs a command in a host's
#                 namespace, as ssh would on a real host
#   mpirun.args   the mpirun options that use them, one per line (hostfile, agent, TCP
#                 between hosts on the subnet only)
#   state         what down removes
#
# Names derive from DIR, so clusters of different DIRs can coexist, and up
# first removes whatever a crashed run with the same DIR left behind.
set -euo pipefail

usage() { sed -n '2,21p' "$0" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd=$1 dir=$2

[[ $cmd == up || -d $dir ]] || { echo "cluster.sh: $dir: no such directory" >&2; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
id=$(printf '%s' "$dir" | md5sum | cut -c1-5)
# Interface names are at most 15 characters: tb<id>, tv<id>h<i>.
bridge="tb$id"
net=$((16#${id:0:2} % 200 + 20)) # third octet, 20..219, from the same hash
subnet="10.77.$net"
ns() { echo "tn${id}h$1"; }

down() {
	local n
	for n in $(ip netns list 2>/dev/null | awk -v p="tn${id}h" 'index($1, p) == 1 {print $1}'); do
		# Processes left in the namespace (a killed test's ranks) go first.
		ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		ip netns del "$n" 2>/dev/null || true
	done
	for n in $(ip -o link show 2>/dev/null | awk -F': ' -v p="tv${id}h" 'index($2, p) == 1 {sub(/@.*/, "", $2); print $2}'); do
		ip link del "$n" 2>/dev/null || true
	done
	ip link del "$bridge" 2>/dev/null || true
	rm -f "$dir/hostfile" "$dir/agent" "$dir/mpirun.args" "$dir/state"
}

check() {
	local left
	left=$( (ip netns list | awk -v p="tn${id}h" 'index($1, p) == 1'; ip -o link show | awk -F': ' -v p="tv${id}h" -v b="$bridge" 'index($2, p) == 1 || $2 == b') 2>/dev/null)
	if [[ -n $left ]]; then
		echo "cluster.sh: left behind for $dir:" >&2
		echo "$left" >&2
		return 1
	fi
}

up() {
	local hosts=$1 rate=${2:-} slots=${3:-2}
	[[ $hosts =~ ^[0-9]+$ && $hosts -ge 1 && $hosts -le 50 ]] || { echo "cluster.sh up: HOSTS must be 1 to 50, not $hosts" >&2; exit 2; }
	[[ $slots =~ ^[0-9]+$ && $slots -ge 1 ]] || { echo "cluster.sh up: SLOTS must be a positive number, not $slots" >&2; exit 2; }
	[[ $(id -u) == 0 ]] || { echo "cluster.sh: needs root (network namespaces, tc)" >&2; exit 1; }
	down
	trap 'echo "cluster.sh up: failed; removing what was made" >&2; down' ERR
	ip link add "$bridge" type bridge
	ip addr add "$subnet.254/24" dev "$bridge" # mpirun, in the root namespace, reaches its daemons here
	ip link set "$bridge" up
	: >"$dir/hostfile"
	local i n v
	for ((i = 1; i <= hosts; i++)); do
		n=$(ns "$i") v="tv${id}h$i"
		ip netns add "$n"
		ip link add "$v" type veth peer name eth0 netns "$n"
		ip link set "$v" master "$bridge" up
		ip -n "$n" addr add "$subnet.$i/24" dev eth0
		ip -n "$n" link set eth0 up
		ip -n "$n" link set lo up
		if [[ -n $rate ]]; then
			# Both directions of the host's link: into the host on the bridge's
			# end of the veth, out of it on the namespace's end. htb's default
			# burst (a timer tick's worth) starved 64 KB GSO packets: 0.4 of the
			# rate for MPI's traffic; with 256 KB, 0.55 to 0.95 (by message
			# size), while one raw TCP stream gets 0.94 either way.
			tc qdisc add dev "$v" root handle 1: htb default 10
			tc class add dev "$v" parent 1: classid 1:10 htb rate "$rate" ceil "$rate" burst 256k cburst 256k quantum 60000
			tc -n "$n" qdisc add dev eth0 root handle 1: htb default 10
			tc -n "$n" class add dev eth0 parent 1: classid 1:10 htb rate "$rate" ceil "$rate" burst 256k cburst 256k quantum 60000
		fi
		echo "$subnet.$i slots=$slots" >>"$dir/hostfile"
	done
	cat >"$dir/agent" <<EOF
#!/bin/sh
# mpirun's launch agent for the cluster in $dir: "agent HOST COMMAND..."
# runs COMMAND in HOST's namespace, as "ssh HOST COMMAND..." would.
host=\$1; shift
case \$host in
$subnet.*) i=\${host##*.} ;;
*) echo "agent: \$host is not a host of this cluster ($subnet.1-$hosts)" >&2; exit 255 ;;
esac
# A UTS namespace of its own gives the host its own name: OpenMPI's shared
# memory transport names its segments after the host, and two "hosts"
# both called after this machine collide (MPI_Init crashed).
exec ip netns exec tn${id}h\$i unshare --uts sh -c "hostname h\$i; \$*"
EOF
	chmod +x "$dir/agent"
	# mpi_yield_when_idle: a veth delivers packets in softirq work that needs
	# the CPU; with every core held by a rank spinning in MPI it waited for
	# the next timer tick, and every message took a multiple of 4 ms.
	printf '%s\n' --hostfile "$dir/hostfile" --mca plm_rsh_agent "$dir/agent" \
		--mca btl tcp,vader,self --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" \
		--mca mpi_yield_when_idle 1 >"$dir/mpirun.args"
	echo "hosts=$hosts rate=$rate subnet=$subnet.0/24 bridge=$bridge" >"$dir/state"
	trap - ERR
}

case $cmd in
up) up "${@:3}" ;;
down) down ;;
check) check ;;
*) usage ;;
esac
