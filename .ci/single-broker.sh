# Sourced by the benchmark scripts: start_single_broker starts ./bin/weir
# as a fresh single-node broker on free loopback ports, with data and log
# in a temporary directory removed on exit, and sets kport (Kafka), aport
# (admin API) and pid. It waits (bounded) until the broker is ready.
# Arguments, if any, are passed on to ./bin/weir after its own flags, e.g.
# start_single_broker --set fetch_memory_budget_bytes=268435456.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

start_single_broker() {
	dir=$(mktemp -d)
	trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
	kport=$(free_port)
	aport=$(free_port)
	./bin/weir --data-dir "$dir/data" --kafka-addr "127.0.0.1:$kport" --admin-addr "127.0.0.1:$aport" \
		--rpc-addr "127.0.0.1:$(free_port)" --log-level warn "$@" 2>"$dir/weir.log" &
	pid=$!
	for _ in $(seq 1 100); do
		curl -sf "http://127.0.0.1:$aport/v1/status/ready" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "weir did not become ready; log:" >&2
	cat "$dir/weir.log" >&2
	return 1
}
