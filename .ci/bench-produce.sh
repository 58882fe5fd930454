#!/usr/bin/env bash
# Produce performance: weir and Apache Kafka (KRaft) side by side, on this
# machine in one run, with the same workloads and the same clients (Kafka's
# own Java ProducerPerformance, and weirctl bench produce, franz-go) for
# both.
#
#   .ci/bench-produce.sh          (make bench-produce; needs bin/weir, bin/weirctl)
#
# For each setup in SETUPS and each system in SYSTEMS, on a fresh broker or
# cluster (started, measured, stopped), these workloads, each writing
# RECORD_SIZE-byte records to a new topic of its own:
#   java-acks-all   ProducerPerformance, 1 producer, 1 partition, acks=all,
#                   JAVA_RECORDS records, no rate limit
#   java-acks-1     the same with acks=1
#   java-20mbs      the same with acks=all at a fixed 20 MB/s (--throughput
#                   20*2^20/RECORD_SIZE records/s; FIXED_MB_PER_SEC changes
#                   the rate and the name), JAVA_FIXED_RECORDS records: latency
#                   at the same load
#   java-100rps     the same with acks=all at 100 records/s (one record per
#                   10 ms, a lone producer's latency), JAVA_SLOW_RECORDS
#                   records
#   java-100rps-acks1  the same with acks=1: the latency of a batch
#                   answered once it is on the leader's disk (weir) or in
#                   its page cache (Kafka), not on a majority
#   weirctl-10x100  PRODUCERS concurrent weirctl bench produce processes,
#                   acks=all, one topic of PARTITIONS_MANY partitions,
#                   GO_RECORDS records between them (the name follows
#                   PRODUCERS and PARTITIONS_MANY). MB/s is the total bytes
#                   over the slowest process's time (each process times from
#                   its start to its last ack); every latency percentile is
#                   the largest of the processes' (p99 = max of the p99s).
#   weirctl-1x1     one weirctl bench produce process, 1 partition,
#                   acks=all, GO_RECORDS/4 records
#   weirctl-txnN    the same with transactions of N records each
#                   (--transaction-records N), for N in TXN_SIZES, each
#                   committed before the next begins: N x TXN_COUNT records,
#                   at most GO_RECORDS/4. weirctl-1x1 is its idempotent
#                   baseline (the transactional producer is idempotent too)
# Each topic is created and waited for until every partition has a leader
# and a full ISR (bounded by CREATE_TIMEOUT), then warmed up, not measured:
# one weirctl bench produce, acks=all, writes WARMUP_KIB_PER_PARTITION KiB
# per partition (at least 1 MiB) to it, enough for franz-go's partitioner
# (a new partition every 64 KiB) to reach every partition. Without it, on a
# new Kafka topic, weirctl's first writes to most partitions stalled about
# 5 s (franz-go's 5 s metadata min age after a retriable error), which a
# short run would measure instead of produce.
# Then (SETTLE_DISK=1, the default) the machine's dirty pages are written
# out with sync before the clock starts: each workload runs on a fresh
# topic of a broker that has run the workloads before it, and without the
# sync what those left dirty in the page cache is written during this one.
# Kafka leaves every produced byte there (it does not fsync), so its
# figure for a workload depended on how much the one before it had
# written and when the kernel's flusher took it: 10 producers x 100
# partitions on one broker made 166 MB/s in one run and 663 in another.
# Nothing a workload writes itself is synced for it: Kafka's bytes of the
# workload stay in the page cache as they would.
# Java figures are ProducerPerformance's own final line (MB/s over its whole
# run; latency percentiles in whole ms); weirctl's are its --format json
# summary. A latency is from handing a record to the client to its ack.
# Setups: single = one broker, replication factor 1; cluster = three
# brokers, replication factor 3. The Java producer runs with its defaults
# otherwise (16 KiB batches, linger 5 ms, 5 requests in flight, idempotent
# with acks=all) and -Xmx512M (as kafka-producer-perf-test.sh); weirctl
# with franz-go's defaults and --timeout 120s (the Java producer's
# delivery.timeout.ms).
#
# Broker CPU: the sum over the system's broker processes of utime+stime
# (/proc/PID/stat, in clock ticks of getconf CLK_TCK), read just before and
# just after each workload's clients run; reported in CPU seconds and in
# CPU milliseconds per MB acknowledged (MB = 2^20 bytes = records x
# RECORD_SIZE). The clients run on the same machine and share its cores:
# their CPU for the workload (user + system of the client processes, from
# the shell's accounting of its children) is reported too, per MB, as
# "client ms/MB", since on two cores a broker that costs its clients more
# CPU leaves less for the rest.
# The machine's idle and I/O-wait shares of its CPU time over the same
# interval (/proc/stat) are the last two columns: a run that leaves the
# cores idle while it waits for the disk shows there, one bound by the
# CPU does not.
#
# Kafka: .ci/kafka.sh fetches its jars with mvn once (cached) and runs three
# combined broker+controller nodes, or one (KAFKA_NODES=1) for single, with
# Kafka's defaults (-Xmx1G, no fsync on produce; weir fsyncs). If java is
# missing or the fetch fails, weir alone is measured, the Java workloads
# are skipped, and the report says why.
#
# Environment (all optional):
#   SYSTEMS ("weir kafka": either or both)  SETUPS ("single cluster")
#   WORKLOADS (all of the above, in that order; a subset by name)
#   RECORD_SIZE (1024)  JAVA_RECORDS (500000)  JAVA_FIXED_RECORDS (1000000)
#   JAVA_SLOW_RECORDS (6000): the fixed-rate runs last about a minute each,
#     so that the Java client's own start (its first records wait ~0.2 s
#     for class loading and JIT, whatever the broker) stays below 1% of
#     the records and p99 is the broker's steady state
#   FIXED_MB_PER_SEC (20)  GO_RECORDS (2000000)  PRODUCERS (10)
#   PARTITIONS_MANY (100)  WARMUP_KIB_PER_PARTITION (512; 0: no warm-up)
#   TXN_SIZES ("1 10 100")  TXN_COUNT (2000)
#   SETTLE_DISK (1; 0: no sync before each workload)
#   READY_TIMEOUT (60 s, weir start and Metadata listing every broker;
#     Kafka's start is bounded by KAFKA_READY_TIMEOUT, 120)
#   CREATE_TIMEOUT (60 s per topic)  WORKLOAD_TIMEOUT (600 s per workload:
#     a workload that runs out is killed and reported as timed out)
#   JAVA_CLIENT_HEAP ("-Xmx512M")
#   OUT_DIR (${TMPDIR:-/tmp}/weir-bench-produce-DATE): results, kept: the
#     tables (bench-produce.txt, also printed), bench-produce.json, every
#     tool's raw output (SETUP/SYSTEM/WORKLOAD.*), every broker's log
#     (SETUP/SYSTEM/logs), notes, and the load average at each workload
#     (loadavg.log: run on an otherwise idle machine).
#   KEEP_DATA=1 keeps the brokers' data (a temp dir, removed on exit).
# Every wait is bounded; only processes this script started are signalled.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
	# No arguments: settings come from the environment. Anything else
	# (-h, --help, a typo) prints the text above.
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	[ "$1" = -h ] || [ "$1" = --help ]
	exit
fi

systems=${SYSTEMS:-weir kafka}
setups=${SETUPS:-single cluster}
record_size=${RECORD_SIZE:-1024}
java_records=${JAVA_RECORDS:-500000}
java_fixed_records=${JAVA_FIXED_RECORDS:-1000000}
java_slow_records=${JAVA_SLOW_RECORDS:-6000}
fixed_mbps=${FIXED_MB_PER_SEC:-20}
go_records=${GO_RECORDS:-2000000}
producers=${PRODUCERS:-10}
partitions_many=${PARTITIONS_MANY:-100}
warmup_kib=${WARMUP_KIB_PER_PARTITION:-512}
txn_sizes=${TXN_SIZES:-1 10 100}
txn_count=${TXN_COUNT:-2000}
ready_timeout=${READY_TIMEOUT:-60}
create_timeout=${CREATE_TIMEOUT:-60}
workload_timeout=${WORKLOAD_TIMEOUT:-600}
settle=${SETTLE_DISK:-1}
java_heap=${JAVA_CLIENT_HEAP:--Xmx512M}
out=${OUT_DIR:-${TMPDIR:-/tmp}/weir-bench-produce-$(date +%Y%m%d-%H%M%S)}
many="weirctl-${producers}x${partitions_many}"
fixed="java-${fixed_mbps}mbs"
txn_workloads=$(for n in $txn_sizes; do printf 'weirctl-txn%s ' "$n"; done)
all_workloads="java-acks-all java-acks-1 $fixed java-100rps java-100rps-acks1 $many weirctl-1x1 ${txn_workloads% }"
workloads=${WORKLOADS:-$all_workloads}

say() { echo "bench-produce: $*"; }
die() {
	echo "bench-produce: $*" >&2
	exit 1
}

for tool in curl python3 timeout getconf; do
	command -v "$tool" >/dev/null || die "$tool is needed"
done
for b in bin/weir bin/weirctl; do
	[ -x "$b" ] || die "$b missing; run make build"
done
for v in record_size java_records java_fixed_records java_slow_records fixed_mbps go_records producers partitions_many ready_timeout create_timeout workload_timeout txn_count; do
	[[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ "$warmup_kib" =~ ^[0-9]+$ ]] || die "WARMUP_KIB_PER_PARTITION must be a number, got '$warmup_kib'"
for n in $txn_sizes; do
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "TXN_SIZES must list positive integers, got '$n'"
done
[ "$go_records" -ge "$producers" ] || die "GO_RECORDS must be at least PRODUCERS"
[ "$go_records" -ge 4 ] || die "GO_RECORDS must be at least 4"
[ "$workload_timeout" -ge 15 ] || die "WORKLOAD_TIMEOUT must be at least 15"
for s in $systems; do
	[ "$s" = weir ] || [ "$s" = kafka ] || die "SYSTEMS: '$s' is neither weir nor kafka"
done
for s in $setups; do
	[ "$s" = single ] || [ "$s" = cluster ] || die "SETUPS: '$s' is neither single nor cluster"
done
for w in $workloads; do
	[[ " $all_workloads " == *" $w "* ]] || die "WORKLOADS: '$w' is not one of: $all_workloads"
done
if [ -z "$systems" ] || [ -z "$setups" ] || [ -z "$workloads" ]; then
	die "SYSTEMS, SETUPS and WORKLOADS must not be empty"
fi
clk=$(getconf CLK_TCK)

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-bench-produce-data.XXXXXX")
# The running cluster, for cleanup: "weir" (pids in weir_pids) or
# "kafka:DIR"; and the clients running now (timeout's pids).
current=""
weir_pids=()
tool_pids=()
nodes=()

cleanup() {
	local rc=$? pid i
	trap - EXIT INT TERM
	for pid in "${tool_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${tool_pids[@]}"; do
		for i in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	stop_cluster || true
	if [ "${KEEP_DATA:-0}" = 1 ]; then
		say "data kept in $work"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# weirctl BOUND ARGS...: bin/weirctl, killed if it outlives BOUND seconds.
weirctl() {
	local bound=$1
	shift
	timeout -k 5 "$bound" ./bin/weirctl "$@"
}

# loadlog WHAT: the machine's load average at each stage, in loadavg.log:
# anything else running on the machine skews every figure (CPU above all).
loadlog() { echo "$(date +%H:%M:%S) $1: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/loadavg.log"; }

# note FILE TEXT: something that went wrong, for the report.
note() {
	echo "$2" >>"$1"
	echo "bench-produce:   note: $2" >&2
}

. ./.ci/weir-nodes.sh

# ---- the running system, whichever it is ------------------------------------

kafka_dir=""

kafka() { KAFKA_NODES=${#nodes[@]} .ci/kafka.sh "$@"; }

start_cluster() { # SYSTEM DIR
	case $1 in
	kafka)
		kafka_dir=$2
		current="kafka:$2"
		kafka start "$2" >/dev/null || return 1
		wait_brokers $((SECONDS + ready_timeout))
		;;
	*) weir_start "$2" ;;
	esac
}

stop_cluster() {
	case $current in
	kafka:*) kafka stop "${current#kafka:}" || true ;;
	weir) weir_stop ;;
	esac
	current=""
}

# cluster_pids: the broker processes' pids, one per line.
cluster_pids() {
	local n
	case $current in
	kafka:*) for n in "${nodes[@]}"; do cat "$kafka_dir/node$n.pid"; done ;;
	weir) printf '%s\n' "${weir_pids[@]}" ;;
	esac
}

cluster_brokers() {
	local n
	if [ "$current" = weir ]; then
		for n in "${nodes[@]}"; do weir_kafka_addr "$n"; done | paste -sd, -
	else
		cat "$kafka_dir/brokers"
	fi
}

# cpu_ticks: utime+stime of every broker process, summed, in clock ticks;
# fails if a broker is gone.
cpu_ticks() {
	local pid stat f total=0
	for pid in $(cluster_pids); do
		stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
		# Fields from the third on, past "pid (comm) ": utime is the
		# 14th field of the line, stime the 15th.
		read -r -a f <<<"${stat##*) }"
		total=$((total + f[11] + f[12]))
	done
	echo "$total"
}

# ---- reading and reporting (python) ----------------------------------------

# py SUBCOMMAND ARGS...:
#   result OUT.json KIND STATUS NOTE TICKS EXPECTED FILE...  one workload's
#     figures from its raw output (KIND java: ProducerPerformance's stdout;
#     weirctl: bench produce --format json documents)
#   report OUT_DIR  the tables, and bench-produce.json
py() { python3 -c "$py_src" "$@"; }
py_src=$(
	cat <<'PY'
import glob, json, os, re, sys

MB = 1024 * 1024
JAVA = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                  r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")

def java(files):
    m = None
    for line in open(files[0], errors="replace"):
        m = JAVA.search(line) or m
    if not m:
        return None, "no final summary line in " + os.path.basename(files[0])
    return {"records": int(m.group(1)), "mb_per_sec": float(m.group(3)), "p50_ms": float(m.group(6)),
            "p99_ms": float(m.group(8)), "p999_ms": float(m.group(9)), "max_ms": float(m.group(5))}, ""

def weirctl(files):
    ss, bad = [], []
    for f in files:
        try:
            ss.append(json.load(open(f)))
        except (OSError, ValueError):
            bad.append(os.path.basename(f))
    if bad:
        return None, "no summary from %s" % ", ".join(bad)
    secs = max(s["seconds"] for s in ss)
    stopped = sorted({s["stopped"] for s in ss} - {"records"})
    r = {"records": sum(s["records"] for s in ss), "processes": len(ss), "seconds": secs,
         "mb_per_sec": sum(s["bytes"] for s in ss) / MB / secs if secs > 0 else 0.0,
         "p50_ms": max(s["p50_ms"] for s in ss), "p99_ms": max(s["p99_ms"] for s in ss),
         "p999_ms": max(s["p999_ms"] for s in ss), "max_ms": max(s["max_ms"] for s in ss),
         "errors": sum(s["errors"] for s in ss)}
    if stopped == ["duration"]:
        return r, "stopped by --duration (WORKLOAD_TIMEOUT less 10 s); partial figures in the workload's .json"
    return r, ("stopped by: " + ",".join(stopped)) if stopped else ""

def children_seconds(path):
    # The second line of the shell's `times`: its reaped children's user
    # and system time, "XmY.YYYs XmY.YYYs".
    line = open(path).read().splitlines()[1]
    return sum(int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", line))

def result(path, kind, status, note, ticks, times_before, times_after, expected, *files):
    clk, size = int(os.environ["CLK"]), int(os.environ["RECORD_SIZE"])
    doc = {"status": status, "notes": [note] if note else []}
    if status in ("ok", "timeout", "failed"):
        r, why = (java if kind == "java" else weirctl)(list(files))
        if r is None:
            if status == "ok":
                doc["status"] = "failed"
            if doc["status"] == "failed":
                doc["notes"].append(why)
        else:
            doc.update(r)
            if why:
                doc["notes"].append(why)
                if status == "ok":
                    doc["status"] = "timeout" if "duration" in why else "failed"
            if r.get("errors"):
                doc["notes"].append("%d records failed" % r["errors"])
            if r["records"] < int(expected):
                doc["notes"].append("%d of %s records acknowledged" % (r["records"], expected))
            doc["mb"] = r["records"] * size / MB
            if ticks != "":
                doc["cpu_seconds"] = int(ticks) / clk
                if doc["mb"] > 0:
                    doc["cpu_ms_per_mb"] = 1000 * doc["cpu_seconds"] / doc["mb"]
            else:
                doc["notes"].append("broker CPU not read (a broker process is gone)")
            try:
                doc["client_cpu_seconds"] = children_seconds(times_after) - children_seconds(times_before)
            except (OSError, IndexError, ValueError):
                doc["notes"].append("client CPU not read")
            else:
                if doc["mb"] > 0:
                    doc["client_cpu_ms_per_mb"] = 1000 * doc["client_cpu_seconds"] / doc["mb"]
            shares = machine_shares(times_before.replace(".times-", ".stat-"), times_after.replace(".times-", ".stat-"))
            if shares:
                doc["machine_idle_pct"], doc["machine_iowait_pct"] = shares
    json.dump(doc, open(path, "w"), indent=1)

def machine_shares(before, after):
    """The machine's idle and I/O-wait shares of its CPU time between two
    reads of /proc/stat's first line, in percent; None if unreadable."""
    try:
        a = [int(x) for x in open(before).read().split()[1:9]]
        b = [int(x) for x in open(after).read().split()[1:9]]
    except (OSError, ValueError):
        return None
    d = [y - x for x, y in zip(a, b)]
    total = sum(d)
    if total <= 0:
        return None
    return 100 * d[3] / total, 100 * d[4] / total

def fmt(v, nd=1):
    return "-" if v is None else ("%.*f" % (nd, v))

def report(out):
    p = json.load(open(os.path.join(out, "params.json")))
    lines, full = [], {"params": p, "setups": {}}
    say = lines.append
    say("weir produce benchmark, %s; %d CPUs; records of %d bytes; MB = 2^20 bytes" % (p["started"], p["host_cpus"], p["record_size"]))
    for sys_ in p["systems"]:
        say("  %-6s %s" % (sys_, p["labels"].get(sys_, "")))
    if p.get("settle_disk"):
        say("dirty pages written out (sync) before each workload's clock starts")
    for setup in p["setups"]:
        desc = {"single": "one broker, replication factor 1", "cluster": "three brokers, replication factor 3"}[setup]
        say("")
        say("== %s: %s" % (setup, desc))
        rows, notes, res = [("workload", "system", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "broker CPU s", "CPU ms/MB", "client ms/MB", "idle %", "iowait %")], [], {}
        for w in p["workloads"]:
            for sys_ in p["systems"]:
                f = os.path.join(out, setup, sys_, w + ".json")
                try:
                    d = json.load(open(f))
                except (OSError, ValueError):
                    d = {"status": "not run", "notes": []}
                res[(w, sys_)] = d
                full["setups"].setdefault(setup, {}).setdefault(sys_, {})[w] = d
                for n in d.get("notes", []):
                    notes.append("%s, %s: %s" % (w, sys_, n))
                if d["status"] == "ok":
                    rows.append((w, sys_, fmt(d["mb_per_sec"], 2), fmt(d["p50_ms"]), fmt(d["p99_ms"]), fmt(d["p999_ms"]),
                                 fmt(d.get("cpu_seconds"), 2), fmt(d.get("cpu_ms_per_mb"), 2), fmt(d.get("client_cpu_ms_per_mb"), 2),
                                 fmt(d.get("machine_idle_pct"), 0), fmt(d.get("machine_iowait_pct"), 0)))
                else:
                    status = {"timeout": "timed out (%ds)" % p["workload_timeout"]}.get(d["status"], d["status"])
                    rows.append((w, sys_, status, "", "", "", "", "", "", "", ""))
        # A status row ("timed out", "skipped") spans the figures' columns.
        widths = [max(len(r[i]) for r in rows if i < 2 or r[3] != "" or r is rows[0]) for i in range(len(rows[0]))]
        for i, r in enumerate(rows):
            cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1])]
            if i > 0 and r[3] == "":
                cells.append(r[2])
            else:
                cells += [c.rjust(widths[j + 2]) for j, c in enumerate(r[2:])]
            say("  " + "  ".join(cells).rstrip())
        if "weir" in p["systems"] and "kafka" in p["systems"]:
            ratios = []
            for w in p["workloads"]:
                a, b = res[(w, "weir")], res[(w, "kafka")]
                if a["status"] != "ok" or b["status"] != "ok":
                    continue
                t = "%.2fx" % (a["mb_per_sec"] / b["mb_per_sec"]) if b.get("mb_per_sec") else "-"
                c = "%.2fx" % (a["cpu_ms_per_mb"] / b["cpu_ms_per_mb"]) if a.get("cpu_ms_per_mb") and b.get("cpu_ms_per_mb") else "-"
                k = "%.2fx" % (a["client_cpu_ms_per_mb"] / b["client_cpu_ms_per_mb"]) if a.get("client_cpu_ms_per_mb") and b.get("client_cpu_ms_per_mb") else "-"
                ratios.append("  %s weir/Kafka throughput %s, CPU per MB %s, client CPU per MB %s" % ((w + ":").ljust(1 + max(len(x) for x in p["workloads"])), t, c, k))
            if ratios:
                say("")
                lines.extend(ratios)
        for sys_ in p["systems"]:
            nf = os.path.join(out, setup, sys_, "notes")
            if os.path.exists(nf):
                notes += ["%s: %s" % (sys_, l.strip()) for l in open(nf) if l.strip()]
        if notes:
            say("")
            say("  notes:")
            lines.extend("    " + n for n in notes)
    if p.get("skipped"):
        say("")
        lines.extend(p["skipped"].values())
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "bench-produce.txt"), "w").write(text)
    json.dump(full, open(os.path.join(out, "bench-produce.json"), "w"), indent=1)
    sys.stdout.write(text)

cmd = sys.argv[1]
{"result": result, "report": report}[cmd](*sys.argv[2:])
PY
)
export CLK=$clk RECORD_SIZE=$record_size

# ---- workloads ----------------------------------------------------------------

java_why="" # why the Java workloads cannot run, if they cannot
libs=""

# create_topic D NAME PARTITIONS: the topic, every partition led with a
# full ISR (bounded by CREATE_TIMEOUT); not settling is a note, not fatal.
create_topic() {
	local d=$1 name=$2 parts=$3 rc=0
	weirctl $((2 * create_timeout + 30)) --brokers "$(cluster_brokers)" --timeout 10s --format json \
		bench scale create "$name" -p "$parts" -r "$rf" --create-timeout "${create_timeout}s" \
		--settle-timeout "${create_timeout}s" >"$d/create-$name.json" 2>>"$d/create-$name.err" || rc=$?
	if [ "$rc" -ne 0 ]; then
		note "$d/notes" "creating topic $name exited with status $rc (see create-$name.err)"
		return 1
	fi
	if ! python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["settled"] else 1)' "$d/create-$name.json" 2>/dev/null; then
		note "$d/notes" "topic $name not settled (leaders, full ISRs) within ${create_timeout}s; producing anyway"
	fi
}

# weirctl_producers D PREFIX TOPIC RECORDS N [FLAGS...]: N bench produce
# processes at once, RECORDS between them, acks=all, with FLAGS added;
# PREFIX-I.json and PREFIX-I.err. Returns 124 if any ran out of
# WORKLOAD_TIMEOUT.
weirctl_producers() {
	local d=$1 prefix=$2 topic=$3 records=$4 n=$5 i per pid rc worst=0 duration
	shift 5
	duration=$((workload_timeout - 10))
	tool_pids=()
	for ((i = 0; i < n; i++)); do
		per=$((records / n + (i < records % n ? 1 : 0)))
		# --duration a little short of the bound, so that a slow run still
		# reports what it did (stopped: duration) before timeout kills it.
		timeout -k 10 "$workload_timeout" ./bin/weirctl --brokers "$(cluster_brokers)" --timeout 120s --format json \
			bench produce "$topic" --records "$per" --record-size "$record_size" --acks all \
			--duration "${duration}s" "$@" >"$d/$prefix-$i.json" 2>"$d/$prefix-$i.err" &
		tool_pids+=($!)
	done
	for pid in "${tool_pids[@]}"; do
		rc=0
		wait "$pid" || rc=$?
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			worst=124
		elif [ "$rc" -ne 0 ] && [ "$worst" = 0 ]; then
			worst=$rc
		fi
	done
	tool_pids=()
	return "$worst"
}

# java_producer D NAME TOPIC RECORDS ACKS THROUGHPUT: ProducerPerformance,
# stdout in NAME.out, stderr in NAME.err.
java_producer() {
	local d=$1 name=$2 topic=$3 records=$4 acks=$5 tput=$6 rc=0
	# shellcheck disable=SC2086 # java_heap is a list of JVM flags
	timeout -k 10 "$workload_timeout" java $java_heap -Duser.language=en -Duser.country=US \
		-Dlog4j2.configurationFile="$out/client-log4j2.properties" -cp "$libs/*" \
		org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$records" \
		--record-size "$record_size" --throughput "$tput" \
		--producer-props bootstrap.servers="$(cluster_brokers)" acks="$acks" \
		</dev/null >"$d/$name.out" 2>"$d/$name.err" &
	tool_pids=($!)
	wait "${tool_pids[0]}" || rc=$?
	tool_pids=()
	[ "$rc" = 137 ] && rc=124
	return "$rc"
}

# run_workload SETUP SYSTEM W: one workload on the running cluster; its
# figures in OUT/SETUP/SYSTEM/W.json.
# settle_disk DIR WORKLOAD: with SETTLE_DISK=1, writes the machine's dirty
# pages out (sync) before the workload is timed, so that what an earlier
# workload left in the page cache (Kafka's unsynced segments, weir's
# segments not yet written back) is not written during this one and
# charged to it. The time it took goes to the notes when it is long.
settle_disk() {
	[ "$settle" = 1 ] || return 0
	local t0=$SECONDS
	timeout -k 5 "$workload_timeout" sync || note "$1/notes" "$2: sync before the workload did not finish within ${workload_timeout}s"
	[ $((SECONDS - t0)) -lt 5 ] || note "$1/notes" "$2: the sync before it took $((SECONDS - t0)) s"
}

run_workload() {
	local setup=$1 sys=$2 w=$3 d="$out/$1/$2" topic="bp-$3" kind status note="" rc before after ticks expected files=()
	local res="$d/$w.json"
	case $w in
	java-*)
		kind=java
		if [ -n "$java_why" ]; then
			py result "$res" java skipped "skipped: $java_why" "" 0
			return 0
		fi
		;;
	*) kind=weirctl ;;
	esac
	local parts=1
	[ "$w" = "$many" ] && parts=$partitions_many
	if ! create_topic "$d" "$topic" "$parts"; then
		py result "$res" "$kind" failed "topic $topic could not be created" "" 0
		return 0
	fi
	if [ "$warmup_kib" -gt 0 ]; then
		local wbytes=$((parts * warmup_kib * 1024))
		[ "$wbytes" -ge $((1024 * 1024)) ] || wbytes=$((1024 * 1024))
		rc=0
		weirctl_producers "$d" "warmup-$w" "$topic" $(((wbytes + record_size - 1) / record_size)) 1 || rc=$?
		[ "$rc" = 0 ] || note "$d/notes" "$w: the warm-up exited with status $rc (see warmup-$w-0.err)"
	fi
	settle_disk "$d" "$w"
	loadlog "$setup $sys $w"
	say "$setup, $sys: $w"
	before=$(cpu_ticks || true)
	times >"$d/.times-$w-before" # builtin, not forked: this shell's children
	head -1 /proc/stat >"$d/.stat-$w-before" 2>/dev/null || true
	rc=0
	case $w in
	java-acks-all)
		expected=$java_records
		java_producer "$d" "$w" "$topic" "$java_records" all -1 || rc=$?
		files=("$d/$w.out")
		;;
	java-acks-1)
		expected=$java_records
		java_producer "$d" "$w" "$topic" "$java_records" 1 -1 || rc=$?
		files=("$d/$w.out")
		;;
	"$fixed")
		expected=$java_fixed_records
		java_producer "$d" "$w" "$topic" "$java_fixed_records" all $((fixed_mbps * 1024 * 1024 / record_size)) || rc=$?
		files=("$d/$w.out")
		;;
	java-100rps)
		expected=$java_slow_records
		java_producer "$d" "$w" "$topic" "$java_slow_records" all 100 || rc=$?
		files=("$d/$w.out")
		;;
	java-100rps-acks1)
		expected=$java_slow_records
		java_producer "$d" "$w" "$topic" "$java_slow_records" 1 100 || rc=$?
		files=("$d/$w.out")
		;;
	"$many")
		expected=$go_records
		weirctl_producers "$d" "$w" "$topic" "$go_records" "$producers" || rc=$?
		files=("$d/$w"-*.json)
		;;
	weirctl-1x1)
		expected=$((go_records / 4))
		weirctl_producers "$d" "$w" "$topic" "$expected" 1 || rc=$?
		files=("$d/$w"-*.json)
		;;
	weirctl-txn*)
		local size=${w#weirctl-txn}
		expected=$((size * txn_count))
		[ "$expected" -le $((go_records / 4)) ] || expected=$((go_records / 4))
		weirctl_producers "$d" "$w" "$topic" "$expected" 1 --transaction-records "$size" || rc=$?
		files=("$d/$w"-*.json)
		;;
	esac
	after=$(cpu_ticks || true)
	times >"$d/.times-$w-after"
	head -1 /proc/stat >"$d/.stat-$w-after" 2>/dev/null || true
	ticks=""
	[ -n "$before" ] && [ -n "$after" ] && ticks=$((after - before))
	case $rc in
	0) status=ok ;;
	124)
		status=timeout
		note="killed after WORKLOAD_TIMEOUT (${workload_timeout}s)"
		;;
	*)
		status=failed
		note="a client exited with status $rc (see $w.err or $w-*.err)"
		;;
	esac
	py result "$res" "$kind" "$status" "$note" "$ticks" "$d/.times-$w-before" "$d/.times-$w-after" "$expected" "${files[@]}"
	rm -f "$d/.times-$w-before" "$d/.times-$w-after" "$d/.stat-$w-before" "$d/.stat-$w-after"
	say "$setup, $sys: $w: $(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
s = d["status"]
if "mb_per_sec" in d:
    s += ", %.2f MB/s, p99 %.1f ms, broker CPU %s s" % (d["mb_per_sec"], d["p99_ms"], "%.2f" % d["cpu_seconds"] if "cpu_seconds" in d else "?")
print("; ".join([s] + d["notes"]))' "$res")"
}

# run_system SETUP SYSTEM: a fresh cluster, every workload, stopped.
run_system() {
	local setup=$1 sys=$2 d="$out/$1/$2" data="$work/$1-$2" w
	mkdir -p "$d"
	say "$setup, $sys: starting a fresh $([ ${#nodes[@]} = 1 ] && echo broker || echo "${#nodes[@]}-broker cluster")"
	if ! start_cluster "$sys" "$data" 2>>"$d/notes"; then
		note "$d/notes" "the cluster did not start (see logs/)"
		stop_cluster
		cluster_logs "$sys" "$d/logs"
		return 0
	fi
	for w in $workloads; do
		if ! cpu_ticks >/dev/null; then
			py result "$d/$w.json" x "not run" "a broker process exited before this workload" "" 0
			continue
		fi
		run_workload "$setup" "$sys" "$w"
	done
	stop_cluster
	cluster_logs "$sys" "$d/logs"
	[ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$data"
}

# ---- main -----------------------------------------------------------------

kversion=$(.ci/kafka.sh version)
libs=$(.ci/kafka.sh libs)
kafka_why=""
if ! command -v java >/dev/null; then
	java_why="java is not installed"
elif ! .ci/kafka.sh fetch >"$out/kafka-fetch.log" 2>&1; then
	java_why="fetching Kafka $kversion's jars with mvn failed (see kafka-fetch.log)"
fi
if [[ " $systems " == *" kafka "* ]] && [ -n "$java_why" ]; then
	kafka_why="Kafka not measured: $java_why"
	say "$kafka_why"
	systems=$(echo "$systems" | xargs -n1 | grep -vx kafka | xargs || true)
fi
if [[ " $workloads " == *" java-"* ]] && [ -n "$java_why" ]; then
	say "Java workloads skipped: $java_why"
fi
[ -n "$systems" ] || die "nothing to measure: $kafka_why"

cat >"$out/client-log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
EOF

LABEL_WEIR="weir $(git describe --always --dirty 2>/dev/null || echo '(unknown commit)')" \
	LABEL_KAFKA="Apache Kafka $kversion (KRaft, broker+controller on each node; no fsync on produce)" \
	PARAMS="$out/params.json" KAFKA_WHY=$kafka_why JAVA_WHY=$java_why SYSTEMS_RUN=$systems SETUPS_RUN=$setups WORKLOADS_RUN=$workloads \
	python3 -c '
import json, os, sys
e = os.environ
systems = e["SYSTEMS_RUN"].split()
labels = {"weir": e["LABEL_WEIR"], "kafka": e["LABEL_KAFKA"]}
skipped = {}
if e["KAFKA_WHY"]: skipped["kafka"] = e["KAFKA_WHY"]
if e["JAVA_WHY"]: skipped["java"] = "Java workloads skipped: " + e["JAVA_WHY"]
n = [int(a) for a in sys.argv[2:]]
json.dump({"systems": systems, "setups": e["SETUPS_RUN"].split(), "workloads": e["WORKLOADS_RUN"].split(),
           "labels": {s: labels[s] for s in systems}, "skipped": skipped,
           "record_size": n[0], "java_records": n[1], "java_fixed_records": n[2], "fixed_mb_per_sec": n[3],
           "go_records": n[4], "producers": n[5], "partitions_many": n[6], "warmup_kib_per_partition": n[7],
           "workload_timeout": n[8], "clk_tck": n[9], "settle_disk": n[10] == 1, "host_cpus": os.cpu_count(),
           "started": sys.argv[1]}, open(e["PARAMS"], "w"), indent=1)
' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$record_size" "$java_records" "$java_fixed_records" "$fixed_mbps" \
	"$go_records" "$producers" "$partitions_many" "$warmup_kib" "$workload_timeout" "$clk" "$settle"
say "results in $out"

for setup in $setups; do
	if [ "$setup" = single ]; then
		nodes=(0)
		rf=1
	else
		nodes=(0 1 2)
		rf=3
	fi
	for sys in $systems; do run_system "$setup" "$sys"; done
done

echo
py report "$out"
echo
say "results: $out (bench-produce.txt, bench-produce.json, raw tool output and broker logs per SETUP/SYSTEM)"
