#!/usr/bin/env bash
# Broker memory under a fetch storm, with the fetch memory budget on and off:
# a fresh single-node broker on free loopback ports with
# fetch_memory_budget_bytes set (default 256 MiB), then weirctl bench memory:
# many consumers, each its own connection, fetching every partition of a
# large backlog from the start at once (50 MiB per request), producers adding
# to it and a stalled consumer that never reads its answer. The broker is then
# stopped, started again on the same data and ports with the budget off
# (fetch_memory_budget_bytes=-1), and the bench runs again on the same
# backlog. For each run the broker's VmHWM (its peak RSS as the kernel
# counted it, which sampling /metrics can miss) is read just before it stops;
# a comparison of the two runs ends the output.
#
#   .ci/bench-memory.sh [consumers] [backlog-bytes]     (default 200 2147483648)
#
# Environment (optional): BENCH_MEMORY_BUDGET (268435456 bytes),
# BENCH_MEMORY_LIMIT (memory_limit_bytes of the budget-on run; default
# unset: the broker's default, a soft limit that follows its memory; the
# budget-off run has none, memory_limit_bytes=-1),
# BENCH_MEMORY_ARGS (more weirctl bench memory flags, e.g. "--stalled 4
# --max-duration 30m"). Progress goes to stderr; the exit status is non-zero
# when either run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

consumers=${1:-200}
backlog=${2:-2147483648}
budget=${BENCH_MEMORY_BUDGET:-268435456}
# With the budget on, the broker's default soft memory limit (which makes
# the budget a bound on the process rather than on live data) or
# BENCH_MEMORY_LIMIT.
limit=${BENCH_MEMORY_LIMIT:-0}
read -r -a extra <<<"${BENCH_MEMORY_ARGS:-}"
topic=bench-memory

for tool in curl python3; do
	command -v "$tool" >/dev/null || { echo "bench-memory: $tool is needed" >&2; exit 1; }
done
for b in bin/weir bin/weirctl; do
	[ -x "$b" ] || { echo "bench-memory: $b missing; run make build" >&2; exit 1; }
done

. ./.ci/single-broker.sh
# The restart reuses every port; start_single_broker picks the Kafka and
# admin ports, and the RPC port given here overrides its own (a later flag
# wins).
rport=$(free_port)
echo "== budget on: fetch_memory_budget_bytes=$budget memory_limit_bytes=$limit"
start_single_broker --rpc-addr "127.0.0.1:$rport" --set "fetch_memory_budget_bytes=$budget" --set "memory_limit_bytes=$limit"

# vmhwm prints the broker's peak RSS in bytes from /proc, or nothing when
# it is gone.
vmhwm() { awk '/^VmHWM:/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status" 2>/dev/null || true; }

stop_broker() {
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "bench-memory: weir (pid $pid) still running 30s after SIGTERM; sending SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# restart_broker ARGS...: ./bin/weir on the same data and ports; the EXIT
# trap of start_single_broker stops it (it reads $pid when it runs).
restart_broker() {
	./bin/weir --data-dir "$dir/data" --kafka-addr "127.0.0.1:$kport" --admin-addr "127.0.0.1:$aport" \
		--rpc-addr "127.0.0.1:$rport" --log-level warn "$@" 2>>"$dir/weir.log" &
	pid=$!
	# Opening a large backlog again takes longer than a fresh start.
	for _ in $(seq 1 600); do
		curl -sf "http://127.0.0.1:$aport/v1/status/ready" >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench-memory: weir did not become ready again; last lines of its log:" >&2
	tail -n 40 "$dir/weir.log" >&2
	return 1
}

# bench TAG: one bench memory run; its JSON summary goes to $dir/TAG.json,
# its exit status to $dir/TAG.rc and the broker's VmHWM after it to
# $dir/TAG.hwm.
bench() {
	local tag=$1 rc=0
	./bin/weirctl --brokers "127.0.0.1:$kport" --format json bench memory "$topic" \
		--admin-url "http://127.0.0.1:$aport" --consumers "$consumers" --backlog-bytes "$backlog" "${extra[@]}" \
		>"$dir/$tag.json" || rc=$?
	echo "$rc" >"$dir/$tag.rc"
	vmhwm >"$dir/$tag.hwm"
	if [ "$rc" -ne 0 ]; then
		echo "bench-memory: $tag: weirctl bench memory exited with status $rc" >&2
		kill -0 "$pid" 2>/dev/null || echo "bench-memory: $tag: the broker is gone (killed for memory?)" >&2
		echo "--- last lines of the broker's log:" >&2
		tail -n 20 "$dir/weir.log" >&2 || true
	fi
	python3 - "$dir" "$tag" <<'EOF' || true
import json, sys
d, tag = sys.argv[1], sys.argv[2]
mib = lambda v: "n/a" if v is None else "%.1f MiB" % (v / 2**20)
try:
    s = json.load(open(f"{d}/{tag}.json"))
except (OSError, ValueError):
    print(f"   {tag}: no summary (the bench failed before its consume phase)")
    sys.exit(0)
hwm = open(f"{d}/{tag}.hwm").read().strip()
print("   %s: %d/%d consumers got all %d records, %s in %.1f s (%.1f MB/s); consumers done after %s-%s s; %s" % (
    tag, s["consumers_completed"], s["consumers"], s["backlog_records"], mib(s["delivered_bytes"]), s["seconds"], s["mb_per_sec"],
    "n/a" if s["fastest_consumer_seconds"] is None else "%.1f" % s["fastest_consumer_seconds"],
    "n/a" if s["slowest_consumer_seconds"] is None else "%.1f" % s["slowest_consumer_seconds"],
    "verified" if s["verified"] else "NOT verified (stopped: %s)" % s["stopped"]))
for b in s["brokers"]:
    budget = b["fetch_budget_bytes"]
    budget = "n/a" if budget is None else ("unbounded" if budget <= 0 else mib(budget))
    count = lambda v: "n/a" if v is None else str(v)
    print("   %s: broker %d: peak RSS %s sampled, VmHWM %s; fetch memory peak %s of %s, %s waits, %s trimmed reads; request memory peak %s, %s waits" % (
        tag, b["node_id"], mib(b["peak_rss_bytes"]), mib(float(hwm)) if hwm else "n/a (broker gone)",
        mib(b["peak_fetch_in_use_bytes"]), budget, count(b["fetch_waits"]), count(b["fetch_trimmed_reads"]),
        mib(b["peak_request_in_use_bytes"]), count(b["request_waits"])))
for f in s.get("failures", [])[:5]:
    print(f"   {tag}: FAILED: {f}")
EOF
}

echo "== $consumers consumers, backlog $backlog bytes, topic $topic"
bench "budget-on"
stop_broker

echo "== budget off: fetch_memory_budget_bytes=-1, memory_limit_bytes=-1 (none), same data"
restart_broker --set "fetch_memory_budget_bytes=-1" --set "memory_limit_bytes=-1"
bench "budget-off"
stop_broker

echo
python3 - "$dir" "$budget" <<'EOF'
import json, sys
d, budget = sys.argv[1], int(sys.argv[2])
mib = lambda v: "n/a" if v is None else "%.1f MiB" % (v / 2**20)
rows = []
for tag, label in (("budget-on", "on (%s)" % mib(budget)), ("budget-off", "off")):
    try:
        s = json.load(open(f"{d}/{tag}.json"))
    except (OSError, ValueError):
        s = None
    hwm = open(f"{d}/{tag}.hwm").read().strip()
    rc = open(f"{d}/{tag}.rc").read().strip()
    rows.append((label, s, float(hwm) if hwm else None, rc))
fmt = "{:<16} {:>10} {:>20} {:>12} {:>9} {:>9} {:>8}"
print(fmt.format("BUDGET", "COMPLETED", "PEAK RSS (/metrics)", "VMHWM", "SECONDS", "MB/S", "STATUS"))
for label, s, hwm, rc in rows:
    if s is None:
        print(fmt.format(label, "n/a", "n/a", mib(hwm), "n/a", "n/a", "exit " + rc))
        continue
    print(fmt.format(label, "%d/%d" % (s["consumers_completed"], s["consumers"]), mib(s["peak_rss_bytes"]), mib(hwm),
                     "%.1f" % s["seconds"], "%.1f" % s["mb_per_sec"], "ok" if rc == "0" else "exit " + rc))
(_, on, on_hwm, _), (_, off, off_hwm, _) = rows
if on_hwm and off_hwm:
    print("\nVmHWM, budget off / on: %.2fx" % (off_hwm / on_hwm))
if on and off and off["mb_per_sec"] > 0:
    print("MB/s, budget on / off:  %.2fx" % (on["mb_per_sec"] / off["mb_per_sec"]))
EOF
for tag in budget-on budget-off; do
	[ "$(cat "$dir/$tag.rc")" = 0 ] || exit 1
done
