#!/usr/bin/env bash
# Compatibility oracle: run franz-go's own kgo integration tests (pkg/kgo,
# at the franz-go version pinned in go.mod) against a freshly started weir.
#
#   .ci/compat.sh            every kgo integration test; exit 1 if a test in
#                            integration/compat/kgo/allow.txt did not pass
#   .ci/compat.sh --short    only integration/compat/kgo/short.txt (a fast
#                            allowlisted subset); exit 1 on any non-pass (a
#                            test that fails is run once more first)
#   .ci/compat.sh --run RE   only integration tests whose name matches the
#                            extended regexp RE (exit 1 as in full mode)
#   .ci/compat.sh --brokers N ...  against a fresh cluster of N brokers
#                            (default 1), with any of the modes above;
#                            topics get min(N, 3) replicas (KGO_TEST_RF)
#
# Exit status: 0 ok, 1 a regression (or any non-pass with --short), 2 the
# oracle itself could not run (build, broker start, stale list names).
#
# Each test runs alone (go test -run '^Name$') under its own timeout, so a
# hang costs one test, not the run. The brokers are checked after every
# test and, if one died, all are restarted on fresh data dirs (the test is
# marked CRASH).
#
# The lists may also name subtests (Parent/sub/...): a subtest is never run
# on its own but read from its parent's run, which selecting it selects.
# (kgo's ETL tests take a slot of a four-slot semaphore before each t.Run
# and give it back inside the subtest, so a -run filter that drops four
# siblings deadlocks them.) A parent that passes can hide a subtest that
# skipped: kgo runs its KIP-848 variants (range/848, sticky/848, ...) only
# when the broker advertises ConsumerGroupHeartbeat v1, and skips them
# otherwise, so those are listed by name. Every subtest's result goes to
# subtests.tsv; a subtest whose checks kgo skipped (an 848 commit in
# OnPartitionsRevoked answered STALE_MEMBER_EPOCH, "pre-KIP-1251 stale
# commit") passes with a note saying so.
#
# kgo learns what the broker supports (KIP-848, static membership) the
# first time a test calls its adm() helper, and TestGroupSimple's 848
# subtest reads that before anything called adm(): run alone it always
# skips. The tests in $primed_tests therefore run after $primer (a quick
# sequential test that calls adm()) in the same process; the primer's own
# result is not recorded, but its failure fails the run.
#
# Environment (all optional):
#   COMPAT_TEST_TIMEOUT  seconds per test (default 180; 90 with --short)
#   COMPAT_BUDGET        seconds for the whole test loop (default 3600; 240
#                        with --short); tests not started in time are NOTRUN
#   COMPAT_OUT           directory for logs and results.tsv (default: a new
#                        temp dir, removed on success unless COMPAT_KEEP=1);
#                        broker logs weir.log, or weir-nodeN.log per broker
#                        of a cluster
#   KGO_TEST_RECORDS     records per ETL test (default: kgo's own, 500000;
#                        20000 with --short)
#   KGO_LOG_LEVEL        kgo client log level in the per-test logs (info)
#   WEIR_LOG_LEVEL       broker --log-level (default warn)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)

mode=full
run_re=
brokers=1
while [ $# -gt 0 ]; do
	case "$1" in
	--short) mode=short ;;
	--run)
		[ $# -ge 2 ] || { echo "compat: --run needs a regexp" >&2; exit 2; }
		mode=run; run_re=$2; shift ;;
	--brokers)
		[[ $# -ge 2 && "$2" =~ ^[1-9]$ ]] || { echo "compat: --brokers needs a count from 1 to 9" >&2; exit 2; }
		brokers=$2; shift ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "compat: unknown argument $1 (want --short, --run RE or --brokers N)" >&2; exit 2 ;;
	esac
	shift
done

if [ "$mode" = short ]; then
	test_timeout=${COMPAT_TEST_TIMEOUT:-90}
	budget=${COMPAT_BUDGET:-240}
else
	test_timeout=${COMPAT_TEST_TIMEOUT:-180}
	budget=${COMPAT_BUDGET:-3600}
fi
export KGO_TEST_RF=$((brokers < 3 ? brokers : 3))
if [ "$mode" = short ]; then
	export KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-20000}
fi
export KGO_LOG_LEVEL=${KGO_LOG_LEVEL:-info}
weir_log_level=${WEIR_LOG_LEVEL:-warn}

# Broker settings the kgo tests assume of a stock Kafka test broker:
# auto-created topics, and for the group tests no initial rebalance delay
# and a 1s minimum session timeout. The group settings are probed first and
# dropped (with a note) if this weir predates them: weir rejects unknown
# cluster properties at startup.
weir_sets=(cluster.auto_create_topics_enabled=true)
optional_sets=(cluster.group_initial_rebalance_delay_ms=0 cluster.group_min_session_timeout_ms=1000)

allow_file=integration/compat/kgo/allow.txt
short_file=integration/compat/kgo/short.txt
primer=TestPauseIssueOct2023
primed_tests=" TestGroupSimple "

log() { echo "compat: $*" >&2; }
names() { sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$1"; }
# tops: the top-level test of each name on stdin (Parent/sub -> Parent).
tops() { sed 's,/.*,,' | awk '!seen[$0]++'; }
# result_of LOG NAME: PASS, FAIL or SKIP, from go test -v's result line for
# NAME (a test or a subtest); empty if there is none.
result_of() {
	awk -v n="$2" '$1 == "---" && $3 == n {s = $2} END {sub(/:$/, "", s); print s}' "$1"
}
# test_lines LOG NAME: NAME's own log lines (file.go:N: ...), attributed by
# go test -v's === RUN/CONT/NAME/PAUSE headers and --- result lines.
test_lines() {
	awk -v n="$2" '
		/^=== (RUN|PAUSE|CONT|NAME)/ {cur = $3; next}
		$1 == "---" && ($2 == "PASS:" || $2 == "FAIL:" || $2 == "SKIP:") {cur = $3; next}
		cur == n && /^[[:space:]]+[A-Za-z0-9_]+\.go:[0-9]+: / {sub(/^[[:space:]]+/, ""); print}' "$1"
}

if [ -n "${COMPAT_OUT:-}" ]; then
	out=$COMPAT_OUT
	mkdir -p "$out" || exit 2
	keep=1
else
	out=$(mktemp -d "${TMPDIR:-/tmp}/weir-compat.XXXXXX") || exit 2
	keep=${COMPAT_KEEP:-0}
fi
mkdir -p "$out/logs" "$out/run"

# pids: the running brokers' process ids, by node id.
pids=()
stop_broker() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		for _ in $(seq 1 150); do # 15s
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$p" 2>/dev/null; then
			log "weir (pid $p) ignored SIGTERM for 15s; killing it"
			kill -KILL "$p" 2>/dev/null
		fi
		wait "$p" 2>/dev/null
	done
	pids=()
}
# brokers_alive: every broker started is still running.
brokers_alive() {
	local p
	[ ${#pids[@]} -gt 0 ] || return 1
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done
}
node_log() { if [ "$brokers" = 1 ]; then echo "$out/weir.log"; else echo "$out/weir-node$1.log"; fi; }
cleanup() {
	stop_broker
	if [ "$keep" = 1 ] || [ "${failed_run:-1}" = 1 ]; then
		log "logs kept in $out"
	else
		rm -rf "$out"
	fi
}
tpid=
on_signal() {
	# wait (below) returns at once on a trapped signal; stop the test too.
	[ -n "$tpid" ] && kill -TERM "$tpid" 2>/dev/null
	exit 130
}
trap cleanup EXIT
trap on_signal INT TERM

# ---------------------------------------------------------------------------
# Build weir and the kgo test binary.

t0=$(date +%s)
log "building weir"
if ! timeout 600 go build -o "$out/weir" ./cmd/weir 2>"$out/build.log"; then
	cat "$out/build.log" >&2; exit 2
fi
kgo_dir=$(go list -f '{{.Dir}}' github.com/twmb/franz-go/pkg/kgo) || exit 2
kgo_version=$(go list -m -f '{{.Version}}' github.com/twmb/franz-go) || exit 2
log "building kgo $kgo_version tests ($kgo_dir)"
# -c builds in the go build cache and writes only $out/kgo.test: nothing is
# written to the (read-only) module cache.
if ! timeout 600 go test -c -o "$out/kgo.test" github.com/twmb/franz-go/pkg/kgo 2>"$out/build.log"; then
	cat "$out/build.log" >&2; exit 2
fi
if ! timeout 300 go run integration/compat/kgo/listtests.go "$kgo_dir" >"$out/integration-tests.txt" 2>"$out/build.log"; then
	cat "$out/build.log" >&2; exit 2
fi
# Sanity check the static list against what the binary really has.
"$out/kgo.test" -test.list '^Test' >"$out/all-tests.txt" 2>/dev/null
missing=$(grep -vxF -f "$out/all-tests.txt" "$out/integration-tests.txt")
if [ -n "$missing" ]; then
	log "listtests found tests the binary does not have: $missing"; exit 2
fi
log "$(wc -l <"$out/integration-tests.txt") of $(wc -l <"$out/all-tests.txt") kgo tests are integration tests (built in $(($(date +%s) - t0))s)"

names "$allow_file" | sort -u >"$out/allow" || exit 2
# An allowlisted or short name that kgo no longer has is an error in the
# list, not a pass: say so instead of silently shrinking coverage. (Of a
# subtest, only its parent can be checked before the run; a subtest its
# parent's run does not report counts as not passing.)
stale=$(tops <"$out/allow" | grep -vxF -f "$out/integration-tests.txt")
if [ -n "$stale" ]; then
	log "allowlisted tests that are not kgo $kgo_version integration tests: $(echo $stale)"; exit 2
fi
if ! grep -qxF "$primer" "$out/integration-tests.txt"; then
	log "the primer $primer is not a kgo $kgo_version integration test"; exit 2
fi
: >"$out/selected-subtests"
case "$mode" in
short)
	names "$short_file" >"$out/short"
	notallowed=$(grep -vxF -f "$out/allow" "$out/short")
	if [ -n "$notallowed" ]; then
		log "$short_file must be a subset of $allow_file; not allowlisted: $(echo $notallowed)"; exit 2
	fi
	grep / "$out/short" >"$out/selected-subtests"
	tops <"$out/short" >"$out/selected" ;;
run) grep -E -- "$run_re" "$out/integration-tests.txt" >"$out/selected" ;;
full) cp "$out/integration-tests.txt" "$out/selected" ;;
esac
if [ ! -s "$out/selected" ]; then
	log "no tests selected"; exit 2
fi

# ---------------------------------------------------------------------------
# The broker.

free_ports() { # N (default 3): N distinct free loopback ports
	python3 -c 'import socket, sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])
for s in ss: s.close()' "${1:-3}"
}

# Probe the optional settings once: weir rejects unknown cluster properties
# at startup, so a broker that does not know them exits within seconds.
probe_set() {
	local d ports kp ap rp p rc
	d=$(mktemp -d "$out/probe.XXXXXX")
	read -r kp ap rp < <(free_ports)
	"$out/weir" --data-dir "$d/data" --kafka-addr "127.0.0.1:$kp" --admin-addr "127.0.0.1:$ap" \
		--rpc-addr "127.0.0.1:$rp" --log-level warn --set "$1" >"$d/log" 2>&1 &
	p=$!
	rc=1
	for _ in $(seq 1 100); do # 10s
		if ! kill -0 "$p" 2>/dev/null; then break; fi
		if curl -sf -m 1 "http://127.0.0.1:$ap/v1/status/ready" >/dev/null 2>&1; then rc=0; break; fi
		sleep 0.1
	done
	kill -TERM "$p" 2>/dev/null
	for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	[ $rc = 0 ] || sed 's/^/compat:   /' "$d/log" | head -3 >&2
	rm -rf "$d"
	return $rc
}
for s in "${optional_sets[@]}"; do
	if probe_set "$s"; then
		weir_sets+=("$s")
	else
		log "weir does not accept --set $s; running without it"
	fi
done

# cluster_formed ADMIN: the broker at ADMIN lists every broker alive.
cluster_formed() {
	curl -sf -m 1 "http://$1/v1/brokers" 2>/dev/null | python3 -c '
import json, sys
bs = json.load(sys.stdin)
sys.exit(0 if sum(1 for b in bs if b.get("is_alive")) == int(sys.argv[1]) else 1)' "$brokers" 2>/dev/null
}

starts=0
start_broker() {
	local attempt n m ports seeds ready
	for attempt in 1 2 3; do
		starts=$((starts + 1))
		read -r -a ports < <(free_ports $((3 * brokers)))
		kafka_addrs=() admin_addrs=() pids=()
		for n in $(seq 0 $((brokers - 1))); do
			kafka_addrs[n]=127.0.0.1:${ports[n]}
			admin_addrs[n]=127.0.0.1:${ports[brokers + n]}
		done
		for n in $(seq 0 $((brokers - 1))); do
			local args=(--data-dir "$out/run/data.$starts")
			if [ "$brokers" -gt 1 ]; then
				seeds=
				for m in $(seq 0 $((brokers - 1))); do
					[ "$m" = "$n" ] || seeds=${seeds:+$seeds,}127.0.0.1:${ports[2 * brokers + m]}
				done
				args=(--node-id "$n" --data-dir "$out/run/data.$starts/node$n" --seeds "$seeds")
			fi
			args+=(--kafka-addr "${kafka_addrs[n]}" --admin-addr "${admin_addrs[n]}"
				--rpc-addr "127.0.0.1:${ports[2 * brokers + n]}" --log-level "$weir_log_level")
			for s in "${weir_sets[@]}"; do args+=(--set "$s"); done
			echo "=== start #$starts $(date -u +%FT%TZ): weir ${args[*]}" >>"$(node_log "$n")"
			"$out/weir" "${args[@]}" >>"$(node_log "$n")" 2>&1 &
			pids[n]=$!
		done
		for _ in $(seq 1 300); do # 30s
			brokers_alive || break
			ready=1
			for n in $(seq 0 $((brokers - 1))); do
				if [ "$(curl -s -o /dev/null -w '%{http_code}' -m 1 "http://${admin_addrs[n]}/v1/status/ready")" != 200 ]; then
					ready=0
					break
				fi
			done
			# A cluster is ready once every broker is registered: the
			# tests create topics with KGO_TEST_RF replicas at once.
			if [ "$ready" = 1 ] && { [ "$brokers" = 1 ] || cluster_formed "${admin_addrs[0]}"; }; then
				return 0
			fi
			sleep 0.1
		done
		log "weir start #$starts did not become ready (attempt $attempt)"
		stop_broker
		cat "$out"/weir*.log | grep -q 'address already in use' || break
	done
	for n in $(seq 0 $((brokers - 1))); do tail -20 "$(node_log "$n")" >&2; done
	return 1
}

start_broker || { log "weir did not start"; exit 2; }
seeds_env() { local IFS=,; echo "${kafka_addrs[*]}"; }
log "weir pids ${pids[*]} on $(seeds_env) (admin ${admin_addrs[*]}), sets: ${weir_sets[*]}"

# ---------------------------------------------------------------------------
# The tests.

# A heuristic: t.Log and t.Error look alike in the output. The first error
# testConsumer reported (ETL tests), else the first *_test.go line that is
# not a known log or skip message.
first_error() {
	local e
	e=$(grep -m1 -o 'testConsumer sendErr group=[0-9a-f]*: .*' "$1" | sed 's/group=[0-9a-f]*/group=.../')
	[ -n "$e" ] || e=$(grep -E '^[[:space:]]+[a-z0-9_]+_test\.go:[0-9]+: ' "$1" |
		grep -vE 'completed in|deleting (topic|group)|NOT DELETING|does not support|not set, skipping' |
		head -1 | sed 's/^[[:space:]]*//')
	printf '%s' "$e"
}

KGO_SEEDS=$(seeds_env)
export KGO_SEEDS
: >"$out/results.tsv"
: >"$out/subtests.tsv"
loop_start=$(date +%s)
# The test binary runs in its own empty directory (not the module cache).
while read -r t; do
	[ -n "$t" ] || continue
	if [ $(($(date +%s) - loop_start)) -ge "$budget" ]; then
		printf '%s\tNOTRUN\t0\tbudget of %ss used up\n' "$t" "$budget" >>"$out/results.tsv"
		continue
	fi
	if ! brokers_alive; then
		stop_broker
		start_broker || { log "weir did not restart"; exit 2; }
		KGO_SEEDS=$(seeds_env)
		export KGO_SEEDS
	fi
	# In --short mode (make test) a test that fails is run once more:
	# kgo's ETL tests have client-side races a loaded machine can hit
	# against any broker (integration/compat/FINDINGS.md). Only a second
	# failure fails it; the first run's log is kept as $t.first.log and its
	# error is reported either way.
	first_why=
	for attempt in 1 2; do
		tlog="$out/logs/$t.log"
		pattern="^${t}\$"
		case "$primed_tests" in *" $t "*) pattern="^($primer|$t)\$" ;; esac
		s=$(date +%s)
		(cd "$out/run" && exec timeout -k 10 "$test_timeout" "$out/kgo.test" \
			-test.run "$pattern" -test.count 1 -test.v -test.timeout "$((test_timeout - 5))s" </dev/null >"$tlog" 2>&1) &
		tpid=$!
		wait "$tpid"
		rc=$?
		tpid=
		secs=$(($(date +%s) - s))
		why=
		if ! brokers_alive; then
			status=CRASH
			why="weir exited during the test (see $(basename "$(node_log 0)" | sed 's/node0/nodeN/'))"
		elif [ $rc = 124 ] || [ $rc = 137 ] || grep -q '^panic: test timed out' "$tlog"; then
			status=TIMEOUT
			why="over ${test_timeout}s"
			first=$(first_error "$tlog")
			[ -z "$first" ] || why="$why; first error: $first"
		elif [ $rc = 0 ] && [ "$(result_of "$tlog" "$t")" = SKIP ]; then
			status=SKIP
			why=$(test_lines "$tlog" "$t" | grep -vE 'completed in|deleting (topic|group)' | tail -1)
		elif [ $rc = 0 ] && [ "$(result_of "$tlog" "$t")" = PASS ]; then
			status=PASS
		else
			status=FAIL
			why=$(first_error "$tlog")
			[ -n "$why" ] || why=$(grep -m1 '^panic:' "$tlog")
			[ -n "$why" ] || why="exit $rc"
		fi
		why=$(printf '%s' "$why" | tr '\t\n' '  ' | cut -c1-160)
		if [ "$status" = FAIL ] && [ "$mode" = short ] && [ "$attempt" = 1 ]; then
			mv "$tlog" "$out/logs/$t.first.log"
			first_why=$why
			log "$t failed ($why); running it once more"
			continue
		fi
		break
	done
	[ -z "$first_why" ] || why="passed when run again; the first run: $first_why"
	[ "$status" != FAIL ] || [ -z "$first_why" ] || why="failed twice; the first run: $first_why"
	printf '%s\t%s\t%s\t%s\n' "$t" "$status" "$secs" "$why" >>"$out/results.tsv"
	printf 'compat: %-58s %-7s %4ss %s\n' "$t" "$status" "$secs" "$why" >&2
	# Its subtests, as its run reported them (a subtest of a test that
	# timed out or crashed may have no result line: it is not recorded).
	awk '$1 == "---" && ($2 == "PASS:" || $2 == "FAIL:" || $2 == "SKIP:") && index($3, "/") {
		secs = $4; gsub(/[()s]/, "", secs); sub(/\..*/, "", secs); sub(/:$/, "", $2); print $3 "\t" $2 "\t" secs
	}' "$tlog" | while IFS=$'\t' read -r st sstatus ssecs; do
		[ "${st%%/*}" = "$t" ] || continue
		swhy=
		if [ "$sstatus" = SKIP ] || [ "$sstatus" = FAIL ]; then
			swhy=$(test_lines "$tlog" "$st" | grep -vE 'completed in|deleting (topic|group)|NOT DELETING' | head -1)
		fi
		if test_lines "$tlog" "$st" | grep -q 'stale commit encountered, skipping validation'; then
			swhy="kgo skipped its checks: a commit in OnPartitionsRevoked got STALE_MEMBER_EPOCH (pre-KIP-1251)${swhy:+; $swhy}"
		fi
		swhy=$(printf '%s' "$swhy" | tr '\t\n' '  ' | cut -c1-160)
		printf '%s\t%s\t%s\t%s\n' "$st" "$sstatus" "$ssecs" "$swhy" >>"$out/subtests.tsv"
		if grep -qxF "$st" "$out/allow" || [ "$sstatus" != PASS ] || [ -n "$swhy" ]; then
			printf 'compat:   %-56s %-7s %4ss %s\n' "$st" "$sstatus" "$ssecs" "$swhy" >&2
		fi
	done
done <"$out/selected"
# Which APIs the tests drove, from the brokers' own counters summed over
# the cluster (the last start only, if the brokers had to be restarted).
apis=$(for a in "${admin_addrs[@]}"; do curl -sf -m 5 "http://$a/metrics" 2>/dev/null; done |
	sed -n 's/^weir_kafka_requests_total{api="\([^"]*\)"} \([0-9.e+]*\)$/\1 \2/p' |
	awk '{n[$1] += $2} END {for (a in n) printf "%s=%d\n", a, n[a]}' | sort | paste -sd' ')
stop_broker
wall=$(($(date +%s) - t0))

# ---------------------------------------------------------------------------
# Summary.

echo
echo "kgo $kgo_version integration tests against weir ($mode mode, $brokers broker(s), ${wall}s wall)"
printf '%-58s %-7s %5s  %-5s %s\n' TEST STATUS SECS ALLOW DETAIL
while IFS=$'\t' read -r t status secs why; do
	a=no
	grep -qxF "$t" "$out/allow" && a=yes
	printf '%-58s %-7s %5s  %-5s %s\n' "$t" "$status" "$secs" "$a" "$why"
	# Its subtests that are allowlisted, did not pass, or carry a note.
	while IFS=$'\t' read -r st sstatus ssecs swhy; do
		[ "${st%%/*}" = "$t" ] || continue
		a=no
		grep -qxF "$st" "$out/allow" && a=yes
		[ "$a" = yes ] || [ "$sstatus" != PASS ] || [ -n "$swhy" ] || continue
		printf '  %-56s %-7s %5s  %-5s %s\n' "$st" "$sstatus" "$ssecs" "$a" "$swhy"
	done <"$out/subtests.tsv"
done <"$out/results.tsv"
echo
for st in PASS FAIL SKIP TIMEOUT CRASH NOTRUN; do
	printf '%s=%s ' "$st" "$(awk -F'\t' -v s=$st '$2==s' "$out/results.tsv" | wc -l)"
done
echo "total=$(wc -l <"$out/results.tsv") subtests=$(wc -l <"$out/subtests.tsv")"
[ -z "$apis" ] || echo "weir requests by API: $apis"

# missing_subtests LIST: the subtests named in LIST whose parent ran but
# reported no result for them, as "name (NOTRUN)".
missing_subtests() {
	awk -F'\t' 'FILENAME == ARGV[1] {if (index($1, "/")) want[$1]; next}
		FILENAME == ARGV[2] {ran[$1]; next}
		{got[$1]}
		END {for (n in want) {p = n; sub(/\/.*/, "", p); if ((p in ran) && !(n in got)) print n " (NOTRUN)"}}' \
		"$1" "$out/results.tsv" "$out/subtests.tsv" | sort
}
failed_run=0
if [ "$mode" = short ]; then
	bad=$( (awk -F'\t' '$2!="PASS"{print $1" ("$2")"}' "$out/results.tsv"
		awk -F'\t' 'FILENAME==ARGV[1]{a[$1];next} ($1 in a) && $2!="PASS"{print $1" ("$2")"}' \
			"$out/selected-subtests" "$out/subtests.tsv"
		missing_subtests "$out/selected-subtests") | sed '/^$/d')
	if [ -n "$bad" ]; then
		echo "short subset: tests that did not pass:"; echo "$bad" | sed 's/^/  /'
		failed_run=1
	fi
else
	new=$(awk -F'\t' '$2=="PASS"{print $1}' "$out/results.tsv" "$out/subtests.tsv" | grep -vxF -f "$out/allow")
	if [ -n "$new" ]; then
		echo "passing but not allowlisted (candidates for $allow_file):"; echo "$new" | sed 's/^/  /'
	fi
	reg=$( (awk -F'\t' 'FILENAME==ARGV[1]{a[$1];next} ($1 in a) && $2!="PASS"{print "  "$1" ("$2")"}' \
		"$out/allow" "$out/results.tsv" "$out/subtests.tsv"
		missing_subtests "$out/allow" | sed 's/^/  /') | sed '/^$/d')
	if [ -n "$reg" ]; then
		echo "REGRESSIONS: allowlisted tests that did not pass:"; echo "$reg"
		failed_run=1
	fi
fi
[ "$failed_run" = 0 ] && echo "compat: OK" || echo "compat: FAILED"
exit "$failed_run"
