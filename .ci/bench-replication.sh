#!/usr/bin/env bash
# What replication costs: start a fresh three-broker cluster on free loopback
# ports, then bench produce with acks=-1 to a replication-factor-1 topic and
# to a replication-factor-3 topic (same partitions, records, record size and
# client settings), alternating RF1, RF3, RF1, RF3 so that warm-up effects
# fall on both, and print one table with the RF3/RF1 ratios.
#
#   .ci/bench-replication.sh [records] [record-size]     (default 200000 1024)
#
# Environment (all optional): BENCH_PARTITIONS (3), BENCH_ROUNDS (2 runs per
# RF), BENCH_WARMUP_RECORDS (10% of records, at most 20000),
# BENCH_READY_TIMEOUT (30 s for the cluster to form and the topics to be
# healthy), BENCH_RUN_TIMEOUT (120 s per bench run), BENCH_LOG_LEVEL (info).
# The nodes' data and logs live in a temp dir that is removed on exit; the
# tail of every node's log is printed when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

records=${1:-200000}
size=${2:-1024}
partitions=${BENCH_PARTITIONS:-3}
rounds=${BENCH_ROUNDS:-2}
warmup=${BENCH_WARMUP_RECORDS:-$((records / 10 < 20000 ? records / 10 : 20000))}
ready_timeout=${BENCH_READY_TIMEOUT:-30}
run_timeout=${BENCH_RUN_TIMEOUT:-120}
log_level=${BENCH_LOG_LEVEL:-info}
op_timeout=10s # weirctl --timeout: admin calls, record delivery, stall detection
nodes=(0 1 2)

for tool in curl python3 timeout; do
	command -v "$tool" >/dev/null || { echo "bench-replication: $tool is needed" >&2; exit 1; }
done
for b in bin/weir bin/weirctl; do
	[ -x "$b" ] || { echo "bench-replication: $b missing; run make build" >&2; exit 1; }
done
[ "$warmup" -ge 1 ] || warmup=1
[ "$rounds" -ge 1 ] || { echo "bench-replication: BENCH_ROUNDS must be >= 1" >&2; exit 2; }
[ "$run_timeout" -ge 15 ] || { echo "bench-replication: BENCH_RUN_TIMEOUT must be >= 15" >&2; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-bench-replication.XXXXXX")
pids=()

dump_logs() {
	local n
	for n in "${nodes[@]}"; do
		[ -f "$dir/node$n.log" ] || continue
		echo "--- last 40 lines of node $n's log ($dir/node$n.log):" >&2
		tail -n 40 "$dir/node$n.log" >&2 || true
	done
}

cleanup() {
	local rc=$? pid i
	trap - EXIT INT TERM
	[ "$rc" -ne 0 ] && dump_logs
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do
		for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "bench-replication: pid $pid still running 10s after SIGTERM; sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$dir"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
	echo "bench-replication: $*" >&2
	exit 1
}

# Nine distinct free ports, all held open until every one is bound so that
# none is handed out twice.
read -r -a ports < <(python3 -c '
import socket
ss = []
for _ in range(9):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss: s.close()')
kafka_addr() { echo "127.0.0.1:${ports[$1]}"; }
admin_addr() { echo "127.0.0.1:${ports[$((3 + $1))]}"; }
rpc_addr() { echo "127.0.0.1:${ports[$((6 + $1))]}"; }
seeds_for() {
	local n=$1 out="" m
	for m in "${nodes[@]}"; do
		[ "$m" = "$n" ] && continue
		out="${out:+$out,}$(rpc_addr "$m")"
	done
	echo "$out"
}
brokers=$(for n in "${nodes[@]}"; do kafka_addr "$n"; done | paste -sd, -)
weirctl() { timeout -k 5 "$run_timeout" ./bin/weirctl --brokers "$brokers" --timeout "$op_timeout" "$@"; }

for n in "${nodes[@]}"; do
	./bin/weir --node-id "$n" --data-dir "$dir/node$n" \
		--kafka-addr "$(kafka_addr "$n")" --admin-addr "$(admin_addr "$n")" \
		--rpc-addr "$(rpc_addr "$n")" --seeds "$(seeds_for "$n")" \
		--log-level "$log_level" </dev/null >"$dir/node$n.log" 2>&1 &
	pids+=($!)
done
echo "== cluster: 3 brokers, kafka $brokers, logs in $dir"

# Every node answers /v1/status/ready, then Metadata lists all three brokers
# and nothing is unhealthy.
deadline=$((SECONDS + ready_timeout))
while :; do
	pending=()
	for n in "${nodes[@]}"; do
		kill -0 "${pids[$n]}" 2>/dev/null || fail "node $n exited while starting"
		curl -sf --max-time 1 "http://$(admin_addr "$n")/v1/status/ready" >/dev/null 2>&1 || pending+=("$n")
	done
	[ ${#pending[@]} -eq 0 ] && break
	[ "$SECONDS" -lt "$deadline" ] || fail "node(s) ${pending[*]} not ready within ${ready_timeout}s"
	sleep 0.2
done

# wait_healthy WHAT: cluster health lists three brokers and no problem.
wait_healthy() {
	local out=""
	deadline=$((SECONDS + ready_timeout))
	while :; do
		out=$(timeout -k 2 5 ./bin/weirctl --brokers "$brokers" --timeout 2s --format json cluster health 2>&1) &&
			[ "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["brokers"]))' <<<"$out" 2>/dev/null)" = 3 ] &&
			return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "$out" >&2
			fail "$1: cluster not healthy with 3 brokers within ${ready_timeout}s"
		fi
		sleep 0.5
	done
}
wait_healthy "startup"

# bench RF RECORDS TAG: one bench produce run; the JSON summary goes to
# $dir/TAG.json, progress and notes to $dir/TAG.err.
bench() {
	local rf=$1 n=$2 tag=$3 rc=0
	weirctl --format json bench produce "bench-rf$rf" -p "$partitions" --replication-factor "$rf" \
		--acks -1 --records "$n" --record-size "$size" --duration "$((run_timeout - 10))s" \
		>"$dir/$tag.json" 2>"$dir/$tag.err" || rc=$?
	grep -E '^(created topic|note:)' "$dir/$tag.err" | sed "s/^/   $tag: /" || true
	if [ "$rc" -ne 0 ] || ! python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(0 if s["stopped"] == "records" and s["errors"] == 0 and s["records"] == int(sys.argv[2]) else 1)' "$dir/$tag.json" "$n" 2>/dev/null; then
		echo "--- $tag: weirctl exit status $rc; summary: $(cat "$dir/$tag.json" 2>/dev/null)" >&2
		echo "--- $tag: last lines of weirctl stderr:" >&2
		tail -n 15 "$dir/$tag.err" >&2 || true
		fail "$tag: bench produce to bench-rf$rf did not complete"
	fi
}

echo "== warm-up: create bench-rf1 and bench-rf3 ($partitions partitions each), $warmup records each"
bench 1 "$warmup" warmup-rf1
bench 3 "$warmup" warmup-rf3
wait_healthy "after warm-up"

# The leader balancer hands a partition's leadership to its preferred
# (first) replica once the current leader has held it for a while; waiting
# for that here keeps a leadership transfer out of the measured runs.
# topic_layout exits 0 when both topics have the asked-for replication
# factor, a full ISR and every leader on its preferred replica, 2 when they
# are not there yet, 1 when something is wrong; --print shows the layout.
topic_layout() {
	python3 - "$brokers" "$@" <<'PY'
import json, subprocess, sys
settled = True
for rf in (1, 3):
    out = subprocess.run(["./bin/weirctl", "--brokers", sys.argv[1], "--timeout", "5s", "--format", "json",
                          "topic", "describe", f"bench-rf{rf}"], capture_output=True, text=True, timeout=15)
    if out.returncode != 0:
        print(f"topic describe bench-rf{rf}: {out.stderr.strip()}", file=sys.stderr)
        sys.exit(1)
    d = json.loads(out.stdout)
    d = d[0] if isinstance(d, list) else d
    parts = d["partitions"]
    if "--print" in sys.argv:
        shape = ", ".join(f"p{p['partition']}: leader {p['leader']} replicas {p['replicas']} isr {p['isr']}" for p in parts)
        print(f"   bench-rf{rf}: {shape}")
    if any(len(p["replicas"]) != rf for p in parts):
        print(f"bench-rf{rf}: replication factor is not {rf}", file=sys.stderr)
        sys.exit(1)
    settled = settled and all(p["leader"] == p["replicas"][0] and len(p["isr"]) == rf for p in parts)
sys.exit(0 if settled else 2)
PY
}
deadline=$((SECONDS + ready_timeout))
while :; do
	rc=0
	topic_layout || rc=$?
	[ "$rc" -eq 1 ] && fail "topic metadata check failed"
	[ "$rc" -eq 0 ] && break
	if [ "$SECONDS" -ge "$deadline" ]; then
		echo "   note: leaders not all on their preferred replicas after ${ready_timeout}s; measuring anyway"
		break
	fi
	sleep 1
done
rc=0
topic_layout --print || rc=$?
[ "$rc" -ne 1 ] || fail "topic metadata check failed"

# log_problems: how many WARN and ERROR lines each node logged, and the
# first few ERRORs, so that a broker complaining during a clean-looking run
# is not missed.
log_problems() {
	local n w e
	for n in "${nodes[@]}"; do
		w=$(grep -c 'level=WARN' "$dir/node$n.log" || true)
		e=$(grep -c 'level=ERROR' "$dir/node$n.log" || true)
		echo "node $n log: $w WARN, $e ERROR lines"
		grep 'level=ERROR' "$dir/node$n.log" | head -n 5 | cut -c1-300 | sed 's/^/   /' || true
	done
}

echo "== measured: $records records of $size bytes per run, acks=-1, $partitions partitions, order RF1,RF3 x $rounds"
order=()
for ((r = 1; r <= rounds; r++)); do order+=(1 3); done
i=0
for rf in "${order[@]}"; do
	i=$((i + 1))
	tag="run$i-rf$rf"
	bench "$rf" "$records" "$tag"
	python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print("   %s: %.2fs, %.0f rec/s, p99 %.2f ms" % (sys.argv[2], s["seconds"], s["records_per_sec"], s["p99_ms"]))' "$dir/$tag.json" "$tag"
done

echo
python3 - "$dir" "${order[@]}" <<'EOF'
import json, sys
d, order = sys.argv[1], sys.argv[2:]
runs = []
for i, rf in enumerate(order, 1):
    s = json.load(open(f"{d}/run{i}-rf{rf}.json"))
    runs.append((f"#{i}", int(rf), s))
cols = ("RUN", "RF", "RECORDS/S", "MB/S", "P50 MS", "P99 MS", "P99.9 MS")
fmt = "{:<10} {:>3} {:>11} {:>9} {:>9} {:>9} {:>9}"
print(fmt.format(*cols))
def row(run, rf, rps, mbs, p50, p99, p999):
    print(fmt.format(run, rf, f"{rps:.0f}", f"{mbs:.2f}", f"{p50:.2f}", f"{p99:.2f}", f"{p999:.2f}"))
for run, rf, s in runs:
    row(run, rf, s["records_per_sec"], s["mb_per_sec"], s["p50_ms"], s["p99_ms"], s["p999_ms"])
mean = {}
for rf in (1, 3):
    ss = [s for _, r, s in runs if r == rf]
    keys = ("records_per_sec", "mb_per_sec", "p50_ms", "p99_ms", "p999_ms")
    mean[rf] = {k: sum(s[k] for s in ss) / len(ss) for k in keys}
    row(f"mean of {len(ss)}", rf, *(mean[rf][k] for k in keys))
print()
print(f"RF3/RF1 throughput (records/s): {mean[3]['records_per_sec'] / mean[1]['records_per_sec']:.2f}x")
print(f"RF3/RF1 p99 latency:            {mean[3]['p99_ms'] / mean[1]['p99_ms']:.2f}x")
EOF
echo
log_problems
