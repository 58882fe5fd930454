#!/usr/bin/env bash
# Soak: builds weir and weirctl, starts a fresh single-node broker on free
# loopback ports (data in a temporary directory, Go profiles on its admin
# API), and runs weirctl bench soak against it with its defaults: 2000 raw
# connections long-polling and churning, 300 partitions over 10 topics,
# 1000 records/s with acks=-1 read by two consumer groups, a sample every
# 10s, and a verdict on growth of the broker's RSS (VmRSS of its PID),
# goroutines, heap in use and connections after warm-up, and on what the
# broker still holds once every client left. When the soak fails, the
# broker's most common goroutine stacks are printed. The broker is then
# stopped by its PID.
#
#   .ci/soak.sh [duration]     (default 10m)
#
# Environment (optional): SOAK_ARGS (more weirctl bench soak flags, e.g.
# "--connections 500 --rate 2000"), GO (the go command). The exit status is
# weirctl's: non-zero on growth, on a record not delivered, or on errors.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-10m}
read -r -a extra <<<"${SOAK_ARGS:-}"
go=${GO:-go}

for tool in curl python3 "$go"; do
	command -v "$tool" >/dev/null || { echo "soak: $tool is needed" >&2; exit 1; }
done

echo "== building bin/weir and bin/weirctl"
"$go" build -o bin/weir ./cmd/weir
"$go" build -o bin/weirctl ./cmd/weirctl

# Both processes hold a descriptor per connection (2000 by default, plus
# the clients' own), and the broker more for its partitions' files. Ask
# for plenty; say so when the hard limit does not allow it.
want_fds=65536
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$want_fds" ]; then
	want_fds=$hard
fi
if ! ulimit -n "$want_fds" 2>/dev/null; then
	echo "soak: could not raise ulimit -n to $want_fds; it stays $(ulimit -n)" >&2
fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 8192 ]; then
	echo "soak: ulimit -n is $(ulimit -n) (hard limit $hard): too few descriptors for 2000 connections and 300 partitions; expect connection errors, or pass fewer --connections in SOAK_ARGS" >&2
fi
echo "== ulimit -n $(ulimit -n)"

. ./.ci/single-broker.sh
start_single_broker --set admin_pprof=true
admin="http://127.0.0.1:$aport"
echo "== broker pid $pid, Kafka 127.0.0.1:$kport, admin $admin, data in $dir"

# metric NAME prints the broker's value of an unlabelled series.
metric() { curl -sf "$admin/metrics" | awk -v n="$1" '$1 == n { printf "%.0f\n", $2 }'; }

stop_broker() {
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "soak: weir (pid $pid) still running 30s after SIGTERM; sending SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

echo "== weirctl bench soak --duration $duration ${extra[*]}"
rc=0
./bin/weirctl --brokers "127.0.0.1:$kport" bench soak --admin-url "$admin" --pid "$pid" --duration "$duration" "${extra[@]}" \
	2> >(tee "$dir/progress.log" >&2) | tee "$dir/soak.txt" || rc=$?

if ! kill -0 "$pid" 2>/dev/null; then
	echo "soak: the broker is gone; last lines of its log:" >&2
	tail -n 40 "$dir/weir.log" >&2
	exit 1
fi

echo
echo "== broker after the soak: $(metric go_goroutines) goroutines, $(metric weir_kafka_connections) connections," \
	"VmHWM $(awk '/^VmHWM:/ { printf "%.1f MiB", $2 / 1024 }' "/proc/$pid/status"), $(ls "/proc/$pid/fd" | wc -l) open files"
if [ "$rc" -ne 0 ]; then
	# The profile groups goroutines by stack, most common first.
	if curl -sf "$admin/debug/pprof/goroutine?debug=1" -o "$dir/goroutines.txt"; then
		echo "== the broker's most common goroutine stacks:"
		awk '/^[0-9]+ @/ { if (n++ >= 8) exit } n { print }' "$dir/goroutines.txt"
	fi
fi
warnings=$(grep -c 'level=\(WARN\|ERROR\)' "$dir/weir.log" || true)
echo "== broker log: $warnings warnings and errors"
if [ "$warnings" -gt 0 ]; then
	grep 'level=\(WARN\|ERROR\)' "$dir/weir.log" | sed -E 's/^time=[^ ]+ //; s/(topic|partition|raft_group|remote|last-leader-[a-z]+)=[^ ]+ ?//g' |
		sort | uniq -c | sort -rn | head -n 10 || true
fi
stop_broker
exit "$rc"
