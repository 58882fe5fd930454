#!/usr/bin/env bash
# End-to-end benchmark: start a fresh single-node broker on free loopback
# ports, run weirctl bench produce and consume against it, stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-500000}
size=${2:-1024}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
kport=$(free_port); aport=$(free_port)
./bin/weir --data-dir "$dir/data" --kafka-addr "127.0.0.1:$kport" --admin-addr "127.0.0.1:$aport" \
	--rpc-addr "127.0.0.1:$(free_port)" --log-level warn 2>"$dir/weir.log" &
pid=$!
for _ in $(seq 1 100); do
	curl -sf "http://127.0.0.1:$aport/v1/status/ready" >/dev/null 2>&1 && break
	sleep 0.1
done
brokers="127.0.0.1:$kport"
echo "== weirctl bench produce: $records records of $size bytes, 3 partitions"
./bin/weirctl --brokers "$brokers" bench produce bench --records "$records" --record-size "$size" --partitions 3
echo "== weirctl bench consume: $records records"
./bin/weirctl --brokers "$brokers" bench consume bench --records "$records"
