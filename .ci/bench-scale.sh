#!/usr/bin/env bash
# What partitions cost: weir and Apache Kafka (KRaft) side by side, three
# brokers each, replication factor 3, on this machine in one run, with the
# same workload and the same client (weirctl, franz-go) for both.
#
#   .ci/bench-scale.sh            (make bench-scale; needs bin/weir, bin/weirctl)
#
# For each system, and for each N in PARTITIONS, on a fresh cluster:
#   1. the empty cluster: RSS, threads, goroutines (weir), open fds, disk
#      (du of the data dirs) per broker, and CPU over IDLE_SECONDS;
#   2. create a topic of N partitions, RF=3: time until CreateTopics
#      answers, and until every partition has a leader and a full ISR in
#      Metadata (bounded by CREATE_TIMEOUT);
#   3. IDLE_AFTER seconds after it settles (what creating leaves to do,
#      on both sides, is not idling), the same figures over IDLE_SECONDS,
#      their growth per replica (N x 3) or per partition, and CPU while
#      idle;
#   4. kill -9 the broker leading the most partitions: time until every
#      partition has another leader (FAILOVER_TIMEOUT); then wait until
#      it is out of every ISR (RECOVER_TIMEOUT; the leaders' lag bound or
#      its session ends it), so that its restart is measured from a
#      shrunk ISR on both systems; restart it: time until every ISR is
#      full again (RECOVER_TIMEOUT).
# Then, on a fresh cluster, PRODUCERS concurrent weirctl bench produce
# processes (one client each) write PRODUCE_RECORDS records of RECORD_SIZE
# bytes in total with acks=all to a topic of PRODUCE_PARTITIONS partitions,
# RF=3, for at most PRODUCE_SECONDS: MB/s and records/s, after a warm-up
# round of PRODUCE_WARMUP_RECORDS records per producer.
#
# Kafka: .ci/kafka.sh fetches its jars with mvn once (~55 MB, cached) and
# runs three combined broker+controller nodes with Kafka's defaults (-Xmx1G,
# no fsync on produce; weir fsyncs). If java, mvn or the fetch fails, weir
# alone is measured and the report says why.
#
# Environment (all optional):
#   PARTITIONS ("1000 3000")  IDLE_SECONDS (30)  IDLE_AFTER (30)  CREATE_TIMEOUT (300)
#   FAILOVER_TIMEOUT (60)  RECOVER_TIMEOUT (120)  READY_TIMEOUT (60, weir
#   start; Kafka's is KAFKA_READY_TIMEOUT, 120)  PRODUCE_PARTITIONS (100)
#   PRODUCERS (10)  PRODUCE_RECORDS (2000000)  RECORD_SIZE (1024)
#   PRODUCE_SECONDS (120)  PRODUCE_WARMUP_RECORDS (2000)  SYSTEMS ("weir kafka": either or both)
#   QUIET_SECONDS (90): before each fresh cluster the page cache is
#     written back and the run waits up to this long for the 1-minute load
#     average to fall below 1 (logged in loadavg.log)
#   BASELINE_REF: also build bin/weir from this git ref (in a temporary
#     git worktree, removed afterwards) and measure it first, as
#     "weir-baseline", to compare the tree with, e.g., BASELINE_REF=HEAD.
#   OUT_DIR (${TMPDIR:-/tmp}/weir-bench-scale-DATE): results, kept: the
#     tables (bench-scale.txt), bench-scale.json, every measurement's
#     document, every broker's log, and the load average at each stage
#     (loadavg.log: run on an otherwise idle machine). Data dirs are in a temp dir removed
#     on exit (KEEP_DATA=1 keeps it).
# Times are wall-clock seconds; every wait is bounded, and a bound that
# runs out is reported ("> N"), not waited past.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
	# No arguments: settings come from the environment. Anything else
	# (-h, --help, a typo) prints the text above.
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	[ "$1" = -h ] || [ "$1" = --help ]
	exit
fi

partitions_list=${PARTITIONS:-1000 3000}
idle=${IDLE_SECONDS:-30}
idle_after=${IDLE_AFTER:-30}
create_timeout=${CREATE_TIMEOUT:-300}
failover_timeout=${FAILOVER_TIMEOUT:-60}
recover_timeout=${RECOVER_TIMEOUT:-120}
ready_timeout=${READY_TIMEOUT:-60}
produce_partitions=${PRODUCE_PARTITIONS:-100}
producers=${PRODUCERS:-10}
produce_records=${PRODUCE_RECORDS:-2000000}
record_size=${RECORD_SIZE:-1024}
produce_seconds=${PRODUCE_SECONDS:-120}
warmup_records=${PRODUCE_WARMUP_RECORDS:-2000}
systems=${SYSTEMS:-weir kafka}
baseline_ref=${BASELINE_REF:-}
out=${OUT_DIR:-${TMPDIR:-/tmp}/weir-bench-scale-$(date +%Y%m%d-%H%M%S)}
rf=3
nodes=(0 1 2)

say() { echo "bench-scale: $*"; }
die() {
	echo "bench-scale: $*" >&2
	exit 1
}

for tool in curl python3 timeout git; do
	command -v "$tool" >/dev/null || die "$tool is needed"
done
for b in bin/weir bin/weirctl; do
	[ -x "$b" ] || die "$b missing; run make build"
done
for v in idle create_timeout failover_timeout recover_timeout ready_timeout produce_partitions producers produce_records record_size produce_seconds warmup_records; do
	[[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ "$idle_after" =~ ^[0-9]+$ ]] || die "IDLE_AFTER must be a whole number of seconds, got '$idle_after'"
for n in $partitions_list; do
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || die "PARTITIONS: '$n' is not a positive integer"
done
[ "$produce_records" -ge "$producers" ] || die "PRODUCE_RECORDS must be at least PRODUCERS"
for s in $systems; do
	[ "$s" = weir ] || [ "$s" = kafka ] || die "SYSTEMS: '$s' is neither weir nor kafka"
done

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-bench-scale-data.XXXXXX")
worktree=""
# The running cluster, for cleanup: "weir" (pids in weir_pids) or a Kafka
# directory (kafka:DIR).
current=""
weir_pids=()
producer_pids=()

cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	for pid in "${producer_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	stop_cluster || true
	if [ -n "$worktree" ]; then
		git worktree remove --force "$worktree" 2>/dev/null || rm -rf "$worktree"
		git worktree prune 2>/dev/null || true
	fi
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

# json_get FILE EXPR: a value from a JSON document (python expression on d).
json_get() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

now_ms() { date +%s%3N; }

# loadlog WHAT: the machine's load average at each stage, in
# loadavg.log, since anything else running on the machine skews every
# figure here (CPU above all).
loadlog() { echo "$(date +%H:%M:%S) $1: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/loadavg.log"; }

# quiet: before each fresh cluster, write back the page cache the last
# stage dirtied (a produce stage leaves gigabytes) and wait, at most
# QUIET_SECONDS, for the 1-minute load average to fall below 1, so one
# stage's aftermath is not measured as the next one's idle CPU.
quiet() {
	local deadline=$((SECONDS + ${QUIET_SECONDS:-90}))
	sync
	while [ $SECONDS -lt $deadline ] && awk '{exit !($1 >= 1)}' /proc/loadavg; do
		sleep 5
	done
	loadlog "quiet before $1"
}

# ---- weir -----------------------------------------------------------------

weir_bin=""
. ./.ci/weir-nodes.sh

# ---- the running system, whichever it is ------------------------------------

kafka_dir=""

start_cluster() { # SYSTEM DIR
	case $1 in
	kafka)
		kafka_dir=$2
		current="kafka:$2"
		.ci/kafka.sh start "$2" >/dev/null || return 1
		wait_brokers $((SECONDS + ready_timeout))
		;;
	*) weir_start "$2" ;;
	esac
}

stop_cluster() {
	case $current in
	kafka:*) .ci/kafka.sh stop "${current#kafka:}" || true ;;
	weir) weir_stop ;;
	esac
	current=""
}

cluster_pids() {
	local n
	case $current in
	kafka:*) for n in "${nodes[@]}"; do cat "$kafka_dir/node$n.pid"; done | paste -sd, - ;;
	*) echo "${weir_pids[@]}" | tr ' ' , ;;
	esac
}

cluster_data_dirs() {
	local d=$weir_dir n
	[ "$current" = weir ] || d=$kafka_dir
	for n in "${nodes[@]}"; do echo "$d/node$n"; done | paste -sd, -
}

cluster_metrics_urls() {
	local n
	[ "$current" = weir ] || return 0
	for n in "${nodes[@]}"; do echo "http://$(weir_admin_addr "$n")/metrics"; done | paste -sd, -
}

# cluster_brokers [EXCEPT]: the bootstrap list, without node EXCEPT.
cluster_brokers() {
	local n all=()
	if [ "$current" = weir ]; then
		for n in "${nodes[@]}"; do all+=("$(weir_kafka_addr "$n")"); done
	else
		IFS=, read -r -a all <"$kafka_dir/brokers"
	fi
	for n in "${nodes[@]}"; do
		[ "$n" = "${1:-}" ] || echo "${all[$n]}"
	done | paste -sd, -
}

kill_node() { # N
	case $current in
	kafka:*) .ci/kafka.sh kill-node "$kafka_dir" "$1" ;;
	*)
		kill -KILL "${weir_pids[$1]}" 2>/dev/null || true
		wait "${weir_pids[$1]}" 2>/dev/null || true
		;;
	esac
}

restart_node() { # N
	case $current in
	kafka:*) .ci/kafka.sh start-node "$kafka_dir" "$1" >/dev/null ;;
	*) weir_start_node "$1" ;;
	esac
}

sample() { # OUT.json WINDOW
	local urls
	urls=$(cluster_metrics_urls)
	weirctl $(($2 + 60)) --timeout 5s --format json bench scale sample --pids "$(cluster_pids)" \
		--data-dirs "$(cluster_data_dirs)" ${urls:+--metrics-urls "$urls"} --window "$2s" >"$1"
}

# ---- one system -----------------------------------------------------------

# note FILE TEXT: something that went wrong, for the report.
note() {
	echo "$2" >>"$1"
	echo "bench-scale:   note: $2" >&2
}

run_partitions() { # SYSTEM KIND N (KIND: weir or kafka; SYSTEM: where results go)
	local sys=$1 kind=$2 n=$3 d="$out/$1/p$3" data="$work/$1-p$3" rc victim since brokers
	mkdir -p "$d"
	say "$sys, $n partitions: starting a fresh cluster"
	if ! start_cluster "$kind" "$data" 2>>"$d/notes"; then
		note "$d/notes" "cluster did not start; see logs/"
		stop_cluster
		cluster_logs "$kind" "$d/logs"
		return 0
	fi
	brokers=$(cluster_brokers)
	say "$sys, $n partitions: empty cluster, ${idle}s"
	loadlog "$sys p$n empty"
	sample "$d/empty.json" "$idle" || note "$d/notes" "sampling the empty cluster failed"

	say "$sys, $n partitions: creating topic scale-$n ($n partitions, RF=$rf), bound ${create_timeout}s"
	rc=0
	weirctl $((2 * create_timeout + 60)) --brokers "$brokers" --timeout 5s --format json \
		bench scale create "scale-$n" -p "$n" -r "$rf" --create-timeout "${create_timeout}s" \
		--settle-timeout "${create_timeout}s" >"$d/create.json" 2>>"$d/notes" || rc=$?
	[ "$rc" -eq 0 ] || note "$d/notes" "bench scale create exited with status $rc"
	[ -s "$d/create.json" ] && say "$sys, $n partitions: $(json_get "$d/create.json" '"CreateTopics %.2fs%s; settled: %s" % (d["create_seconds"], " ("+d["create_error"]+")" if d.get("create_error") else "", "%.2fs" % d["settle_seconds"] if d["settled"] else "no, %d pending" % d["pending"])')"

	say "$sys, $n partitions: idle, ${idle}s after ${idle_after}s"
	sleep "$idle_after"
	loadlog "$sys p$n idle"
	sample "$d/idle.json" "$idle" || note "$d/notes" "sampling after the create failed"

	rc=0
	weirctl 30 --brokers "$brokers" --timeout 10s --format json bench scale layout "scale-$n" >"$d/layout.json" 2>>"$d/notes" || rc=$?
	victim=-1
	[ "$rc" -eq 0 ] && victim=$(json_get "$d/layout.json" 'd["most_leaders"]')
	if [ "$victim" -lt 0 ]; then
		note "$d/notes" "no partition has a leader; failover not measured"
	else
		say "$sys, $n partitions: kill -9 broker $victim (leads $(json_get "$d/layout.json" 'd["most_leaders_count"]')), bound ${failover_timeout}s"
		since=$(now_ms)
		kill_node "$victim"
		rc=0
		weirctl $((failover_timeout + 30)) --brokers "$(cluster_brokers "$victim")" --timeout 2s --format json \
			bench scale wait "scale-$n" --until moved --broker "$victim" --timeout "${failover_timeout}s" \
			--since-unix-ms "$since" >"$d/failover.json" 2>>"$d/notes" || rc=$?
		[ "$rc" -eq 0 ] || note "$d/notes" "bench scale wait --until moved exited with status $rc"
		rc=0
		weirctl $((recover_timeout + 30)) --brokers "$(cluster_brokers "$victim")" --timeout 2s --format json \
			bench scale wait "scale-$n" --until out --broker "$victim" --timeout "${recover_timeout}s" \
			--since-unix-ms "$since" >"$d/out.json" 2>>"$d/notes" || rc=$?
		[ "$rc" -eq 0 ] || note "$d/notes" "bench scale wait --until out exited with status $rc"
		say "$sys, $n partitions: broker $victim out of every ISR $(json_get "$d/out.json" '"%.2fs" % d["seconds"] if d["met"] else "not within %gs" % d["timeout_seconds"]' 2>/dev/null || echo '?') after the kill"
		say "$sys, $n partitions: restart broker $victim, bound ${recover_timeout}s"
		since=$(now_ms)
		restart_node "$victim" 2>>"$d/notes" || note "$d/notes" "restarting broker $victim failed"
		rc=0
		weirctl $((recover_timeout + 30)) --brokers "$brokers" --timeout 2s --format json \
			bench scale wait "scale-$n" --until settled --timeout "${recover_timeout}s" \
			--since-unix-ms "$since" >"$d/recover.json" 2>>"$d/notes" || rc=$?
		[ "$rc" -eq 0 ] || note "$d/notes" "bench scale wait --until settled exited with status $rc"
		say "$sys, $n partitions: failover $(json_get "$d/failover.json" '"%.2fs" % d["seconds"] if d["met"] else "not within %gs" % d["timeout_seconds"]' 2>/dev/null || echo '?'), rejoin $(json_get "$d/recover.json" '"%.2fs" % d["seconds"] if d["met"] else "not within %gs" % d["timeout_seconds"]' 2>/dev/null || echo '?')"
	fi
	stop_cluster
	cluster_logs "$kind" "$d/logs"
	rm -rf "$data"
}

# produce_round DIR TAG RECORDS BROKERS: PRODUCERS bench produce processes
# at once, each writing RECORDS records; summaries in DIR/TAG-I.json.
produce_round() {
	local d=$1 tag=$2 records=$3 brokers=$4 i pid
	producer_pids=()
	# --timeout 120s is Kafka's producer default delivery.timeout.ms: a
	# record slower than that fails the producer, as it would a Java one.
	for ((i = 0; i < producers; i++)); do
		weirctl $((produce_seconds + 180)) --brokers "$brokers" --timeout 120s --format json \
			bench produce scale-produce --records "$records" --record-size "$record_size" --acks -1 \
			--duration "${produce_seconds}s" >"$d/$tag-$i.json" 2>"$d/$tag-$i.err" &
		producer_pids+=($!)
	done
	for pid in "${producer_pids[@]}"; do
		wait "$pid" || note "$d/notes" "a $tag exited with status $? (see $tag-*.err)"
	done
	producer_pids=()
}

run_produce() { # SYSTEM KIND
	local sys=$1 kind=$2 d="$out/$1/produce" data="$work/$1-produce" rc per brokers
	mkdir -p "$d"
	say "$sys, produce: starting a fresh cluster"
	if ! start_cluster "$kind" "$data" 2>>"$d/notes"; then
		note "$d/notes" "cluster did not start"
		stop_cluster
		cluster_logs "$kind" "$d/logs"
		return 0
	fi
	brokers=$(cluster_brokers)
	rc=0
	weirctl $((2 * create_timeout + 60)) --brokers "$brokers" --timeout 5s --format json \
		bench scale create scale-produce -p "$produce_partitions" -r "$rf" --create-timeout "${create_timeout}s" \
		--settle-timeout "${create_timeout}s" >"$d/create.json" 2>>"$d/notes" || rc=$?
	if [ "$rc" -ne 0 ] || [ "$(json_get "$d/create.json" 'd["settled"]' 2>/dev/null)" != True ]; then
		note "$d/notes" "topic scale-produce not settled; producing anyway"
	fi
	per=$((produce_records / producers))
	# A warm-up round first, not measured, for both systems alike: on a
	# fresh Kafka the first idempotent producers' records waited about 5 s
	# for their first acks here, and neither system's first writes to a
	# new topic are its steady state.
	say "$sys, produce: warm-up, $producers producers x $warmup_records records"
	produce_round "$d" warmup "$warmup_records" "$brokers"
	say "$sys, produce: $producers producers x $per records of $record_size bytes, acks=all, $produce_partitions partitions, bound ${produce_seconds}s"
	loadlog "$sys produce"
	produce_round "$d" producer "$per" "$brokers"
	loadlog "$sys produced"
	say "$sys, produce: $(python3 -c '
import glob, json, sys
ss = [json.load(open(f)) for f in glob.glob(sys.argv[1] + "/producer-*.json") if open(f).read().strip()]
secs = max((s["seconds"] for s in ss), default=0)
recs = sum(s["records"] for s in ss)
byts = sum(s["bytes"] for s in ss)
print("%d records in %.2fs: %.2f MB/s" % (recs, secs, byts / 2**20 / secs) if secs else "no producer finished")' "$d")"
	stop_cluster
	cluster_logs "$kind" "$d/logs"
	rm -rf "$data"
}

run_system() { # SYSTEM (weir, weir-baseline, kafka)
	local sys=$1 kind=$1 n
	[ "$kind" = weir-baseline ] && kind=weir
	for n in $partitions_list; do
		quiet "$sys $n"
		run_partitions "$sys" "$kind" "$n"
	done
	quiet "$sys produce"
	run_produce "$sys" "$kind"
}

# ---- main -----------------------------------------------------------------

: >"$out/systems"
printf '{"partitions": [%s], "replication_factor": %d, "idle_seconds": %d, "idle_after_seconds": %d, "create_timeout_seconds": %d, "failover_timeout_seconds": %d, "recover_timeout_seconds": %d, "produce_partitions": %d, "producers": %d, "produce_records": %d, "record_size": %d, "produce_seconds": %d, "baseline_ref": "%s", "weir_commit": "%s", "host_cpus": %d, "started": "%s"}\n' \
	"$(echo "$partitions_list" | xargs | tr ' ' ,)" "$rf" "$idle" "$idle_after" "$create_timeout" "$failover_timeout" "$recover_timeout" \
	"$produce_partitions" "$producers" "$produce_records" "$record_size" "$produce_seconds" "$baseline_ref" \
	"$(git describe --always --dirty 2>/dev/null || echo unknown)" "$(nproc)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$out/params.json"
say "results in $out"

if [ -n "$baseline_ref" ]; then
	echo weir-baseline >>"$out/systems"
	mkdir -p "$out/weir-baseline"
	commit=$(git rev-parse --short "$baseline_ref^{commit}" 2>/dev/null) || die "BASELINE_REF '$baseline_ref' is not a commit"
	echo "weir $baseline_ref ($commit), the baseline" >"$out/weir-baseline/label"
	worktree="$work/baseline-src"
	say "building weir from $baseline_ref ($commit) in a temporary worktree"
	git worktree add --detach "$worktree" "$commit" >/dev/null 2>&1 || die "git worktree add for $baseline_ref failed"
	(cd "$worktree" && go build -o "$work/weir-baseline" ./cmd/weir) || die "building weir at $baseline_ref failed"
	git worktree remove --force "$worktree"
	worktree=""
	weir_bin="$work/weir-baseline"
	run_system weir-baseline
fi

if [[ " $systems " == *" weir "* ]]; then
	echo weir >>"$out/systems"
	mkdir -p "$out/weir"
	echo "weir $(git describe --always --dirty 2>/dev/null || echo '(unknown commit)')" >"$out/weir/label"
	weir_bin=./bin/weir
	run_system weir
fi

if [[ " $systems " == *" kafka "* ]]; then
	echo kafka >>"$out/systems"
	mkdir -p "$out/kafka"
	kversion=$(.ci/kafka.sh version)
	echo "Apache Kafka $kversion (KRaft, broker+controller on each node)" >"$out/kafka/label"
	if ! command -v java >/dev/null; then
		echo "java is not installed" >"$out/kafka/skipped"
	elif ! .ci/kafka.sh fetch >"$out/kafka/fetch.log" 2>&1; then
		echo "fetching Kafka $kversion with mvn failed (see kafka/fetch.log)" >"$out/kafka/skipped"
	fi
	if [ -f "$out/kafka/skipped" ]; then
		say "Kafka not measured: $(cat "$out/kafka/skipped")"
	else
		run_system kafka
	fi
fi

echo
./bin/weirctl bench scale report "$out" --json-out "$out/bench-scale.json" | tee "$out/bench-scale.txt"
echo
say "results: $out (bench-scale.txt, bench-scale.json, per-stage documents, broker logs)"
