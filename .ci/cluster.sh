#!/usr/bin/env bash
# A local three-broker weir cluster on loopback.
#
#   .ci/cluster.sh start   build bin/weir, start nodes 0..2, wait until ready
#   .ci/cluster.sh stop    SIGTERM every node, wait for it to exit
#
# Node N: Kafka 127.0.0.1:909(2+N), admin 127.0.0.1:964(4+N), RPC
# 127.0.0.1:3314(5+N); data in ./data/nodeN, log ./data/nodeN.log, pid
# ./data/nodeN.pid. Each node's --seeds are the other two RPC addresses.
# CLUSTER_READY_TIMEOUT and CLUSTER_STOP_TIMEOUT (seconds, default 30 and
# 20) bound the waits.
#
# RACKS (start only): a comma-separated rack per node, in node order, e.g.
# RACKS=a,b,c gives node 0 --rack a, node 1 --rack b, node 2 --rack c.
# Empty or unset: no node has a rack. Any other number of racks, or an
# empty one, is refused before anything is built or started.
#
# COALESCING (start only, default true): kafka_fetch_read_coalescing_enabled
# of a cluster created by this start (make run's default too; an existing
# cluster keeps its own setting). Anything but true or false is refused.
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=(0 1 2)
data=./data
ready_timeout=${CLUSTER_READY_TIMEOUT:-30}
stop_timeout=${CLUSTER_STOP_TIMEOUT:-20}

kafka_addr() { echo "127.0.0.1:$((9092 + $1))"; }
admin_addr() { echo "127.0.0.1:$((9644 + $1))"; }
rpc_addr() { echo "127.0.0.1:$((33145 + $1))"; }
pid_file() { echo "$data/node$1.pid"; }
log_file() { echo "$data/node$1.log"; }

seeds_for() {
	local n=$1 out="" m
	for m in "${nodes[@]}"; do
		[ "$m" = "$n" ] && continue
		out="${out:+$out,}$(rpc_addr "$m")"
	done
	echo "$out"
}

# node_pid N prints the pid of node N if its pid file names a live weir
# process; a stale pid file (process gone, or the pid reused by something
# else) is removed.
node_pid() {
	local f pid
	f=$(pid_file "$1")
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		ps -ww -o args= -p "$pid" 2>/dev/null | grep -q -- "weir --node-id $1 "; then
		echo "$pid"
		return 0
	fi
	rm -f "$f"
	return 1
}

# parse_racks fills racks from RACKS: one non-empty rack per node (spaces
# around each are dropped), or none at all when RACKS is empty or unset.
racks=()
parse_racks() {
	local spec=${RACKS:-} rest r i
	racks=()
	[ -n "${spec//[[:space:]]/}" ] || return 0
	rest=$spec
	while :; do
		r=${rest%%,*}
		r=${r#"${r%%[![:space:]]*}"}
		r=${r%"${r##*[![:space:]]}"}
		racks+=("$r")
		[[ "$rest" == *,* ]] || break
		rest=${rest#*,}
	done
	if [ ${#racks[@]} -ne ${#nodes[@]} ]; then
		echo "cluster.sh: RACKS='$spec' names ${#racks[@]} rack(s) for ${#nodes[@]} brokers; give exactly one per broker, in node order (e.g. RACKS=a,b,c), or leave RACKS empty for no racks" >&2
		return 1
	fi
	for i in "${!racks[@]}"; do
		if [ -z "${racks[$i]}" ]; then
			echo "cluster.sh: RACKS='$spec': the rack for node ${nodes[$i]} (element $((i + 1))) is empty; give every broker a rack, or leave RACKS empty for no racks" >&2
			return 1
		fi
	done
}

coalescing=${COALESCING:-true}
check_coalescing() {
	case "$coalescing" in
	true | false) return 0 ;;
	esac
	echo "cluster.sh: COALESCING='$coalescing': give true or false" >&2
	return 1
}

ready() { curl -sf --max-time 1 "http://$(admin_addr "$1")/v1/status/ready" >/dev/null 2>&1; }

start() {
	parse_racks || exit 2
	check_coalescing || exit 2
	command -v curl >/dev/null || { echo "cluster.sh: curl is needed to wait for readiness" >&2; exit 1; }
	local n pid
	for n in "${nodes[@]}"; do
		if pid=$(node_pid "$n"); then
			echo "cluster.sh: node $n is already running (pid $pid); run '$0 stop' first" >&2
			exit 1
		fi
	done
	if command -v make >/dev/null; then
		make build
	else
		go build -o bin/weir ./cmd/weir
		go build -o bin/weirctl ./cmd/weirctl
	fi

	local i rack_note
	local -a rack_flag
	for i in "${!nodes[@]}"; do
		n=${nodes[$i]}
		rack_flag=() rack_note=""
		if [ ${#racks[@]} -gt 0 ]; then
			rack_flag=(--rack "${racks[$i]}")
			rack_note=", rack ${racks[$i]}"
		fi
		mkdir -p "$data/node$n"
		nohup ./bin/weir --node-id "$n" --data-dir "$data/node$n" \
			--kafka-addr "$(kafka_addr "$n")" --admin-addr "$(admin_addr "$n")" \
			--rpc-addr "$(rpc_addr "$n")" --seeds "$(seeds_for "$n")" \
			--set "cluster.kafka_fetch_read_coalescing_enabled=$coalescing" \
			${rack_flag[@]+"${rack_flag[@]}"} \
			</dev/null >>"$(log_file "$n")" 2>&1 &
		echo $! >"$(pid_file "$n")"
		echo "node $n: pid $!${rack_note}, kafka $(kafka_addr "$n"), admin $(admin_addr "$n"), rpc $(rpc_addr "$n"), log $(log_file "$n")"
	done

	local deadline=$((SECONDS + ready_timeout)) pending
	while :; do
		pending=()
		for n in "${nodes[@]}"; do
			if ! node_pid "$n" >/dev/null; then
				echo "cluster.sh: node $n exited while starting; last lines of $(log_file "$n"):" >&2
				tail -n 20 "$(log_file "$n")" >&2 || true
				stop || true
				exit 1
			fi
			ready "$n" || pending+=("$n")
		done
		[ ${#pending[@]} -eq 0 ] && break
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "cluster.sh: node(s) ${pending[*]} not ready within ${ready_timeout}s" >&2
			for n in "${pending[@]}"; do
				echo "--- last lines of $(log_file "$n"):" >&2
				tail -n 20 "$(log_file "$n")" >&2 || true
			done
			stop || true
			exit 1
		fi
		sleep 0.2
	done
	local brokers
	brokers=$(for n in "${nodes[@]}"; do kafka_addr "$n"; done | paste -sd, -)
	echo "cluster ready: bin/weirctl --brokers $brokers cluster info"
}

stop() {
	local n pid pids=() failed=0
	for n in "${nodes[@]}"; do
		if pid=$(node_pid "$n"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$n:$pid")
		fi
	done
	local deadline=$((SECONDS + stop_timeout)) entry
	for entry in "${pids[@]}"; do
		n=${entry%%:*} pid=${entry#*:}
		while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "cluster.sh: node $n (pid $pid) still running ${stop_timeout}s after SIGTERM; sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
			for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			failed=1
		else
			echo "node $n (pid $pid) stopped"
		fi
		rm -f "$(pid_file "$n")"
	done
	[ ${#pids[@]} -gt 0 ] || echo "no cluster node running"
	return "$failed"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
