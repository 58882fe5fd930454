# Sourced by the benchmark scripts that run weir clusters of their own
# (bench-scale.sh, bench-produce.sh): free loopback ports, and every node of
# the array nodes started, waited for and stopped. The sourcing script sets
# nodes (node ids, 0-based), ready_timeout (seconds), weir_bin (default
# ./bin/weir) and defines weirctl (its weirctl wrapper, first argument a
# timeout in seconds) and cluster_brokers (the Kafka addresses to ask);
# weir_start sets current=weir, weir_dir, weir_ports and weir_pids.

free_ports() { # N: N distinct free loopback ports, all held until each is bound
	python3 -c '
import socket, sys
ss = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss: s.close()' "$1"
}

# ---- weir -----------------------------------------------------------------

weir_dir=""
weir_ports=()

weir_kafka_addr() { echo "127.0.0.1:${weir_ports[$1]}"; }
weir_admin_addr() { echo "127.0.0.1:${weir_ports[$((${#nodes[@]} + $1))]}"; }
weir_rpc_addr() { echo "127.0.0.1:${weir_ports[$((2 * ${#nodes[@]} + $1))]}"; }

weir_start_node() {
	local n=$1 m seeds=""
	for m in "${nodes[@]}"; do
		[ "$m" = "$n" ] || seeds="${seeds:+$seeds,}$(weir_rpc_addr "$m")"
	done
	"${weir_bin:-./bin/weir}" --node-id "$n" --data-dir "$weir_dir/node$n" \
		--kafka-addr "$(weir_kafka_addr "$n")" --admin-addr "$(weir_admin_addr "$n")" \
		--rpc-addr "$(weir_rpc_addr "$n")" ${seeds:+--seeds "$seeds"} \
		</dev/null >>"$weir_dir/node$n.log" 2>&1 &
	weir_pids[n]=$!
}

# weir_start DIR: every node of nodes on free loopback ports; 0 once each
# is ready and Metadata lists them all.
weir_start() {
	weir_dir=$1
	mkdir -p "$weir_dir"
	read -r -a weir_ports < <(free_ports $((3 * ${#nodes[@]})))
	weir_pids=()
	current=weir
	local n pending deadline=$((SECONDS + ready_timeout))
	for n in "${nodes[@]}"; do weir_start_node "$n"; done
	while :; do
		pending=()
		for n in "${nodes[@]}"; do
			kill -0 "${weir_pids[$n]}" 2>/dev/null || {
				echo "weir node $n exited while starting" >&2
				return 1
			}
			curl -sf --max-time 1 "http://$(weir_admin_addr "$n")/v1/status/ready" >/dev/null 2>&1 || pending+=("$n")
		done
		[ ${#pending[@]} -eq 0 ] && break
		[ "$SECONDS" -lt "$deadline" ] || {
			echo "weir node(s) ${pending[*]} not ready within ${ready_timeout}s" >&2
			return 1
		}
		sleep 0.2
	done
	wait_brokers "$deadline"
}

weir_stop() {
	local pid i
	for pid in "${weir_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${weir_pids[@]}"; do
		for i in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "$(basename "$0" .sh): weir pid $pid still running 20s after SIGTERM; sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
	weir_pids=()
}

cluster_logs() { # KIND DEST: copy every node's log (after stop_cluster too)
	local d=$weir_dir n
	[ "$1" = weir ] || d=$kafka_dir
	mkdir -p "$2"
	for n in "${nodes[@]}"; do cp "$d/node$n.log" "$2/node$n.log" 2>/dev/null || true; done
}

# wait_brokers DEADLINE: Metadata lists every broker.
wait_brokers() {
	local deadline=$1 got
	while :; do
		got=$(weirctl 10 --brokers "$(cluster_brokers)" --timeout 2s --format json bench scale layout 2>/dev/null |
			python3 -c 'import json,sys; print(len(json.load(sys.stdin)["brokers"]))' 2>/dev/null || true)
		[ "$got" = ${#nodes[@]} ] && return 0
		[ "$SECONDS" -lt "$deadline" ] || {
			echo "Metadata does not list ${#nodes[@]} brokers (got '${got:-nothing}') in time" >&2
			return 1
		}
		sleep 0.5
	done
}
