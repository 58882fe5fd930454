#!/usr/bin/env bash
# A local Apache Kafka (KRaft) cluster of three nodes (or one, with
# KAFKA_NODES=1) on free loopback ports, for benchmarks that put weir and
# Kafka side by side on the same machine.
#
#   .ci/kafka.sh fetch               fetch Kafka's jars with mvn (once)
#   .ci/kafka.sh libs                print the directory of the jars
#   .ci/kafka.sh fetch-frameworks    fetch Kafka Connect's and Kafka Streams' jars (once)
#   .ci/kafka.sh frameworks          print the directory of those jars
#   .ci/kafka.sh version             print the Kafka version used
#   .ci/kafka.sh start DIR           format and start nodes 0..2 (or 0) in DIR
#   .ci/kafka.sh stop DIR            SIGTERM every node, SIGKILL after a bound
#   .ci/kafka.sh kill-node DIR N     SIGKILL node N (a crash)
#   .ci/kafka.sh start-node DIR N    start node N again on its data
#
# fetch copies org.apache.kafka:kafka_2.13 and kafka-tools (KAFKA_VERSION,
# default 4.1.2, the newest 4.1.x on Maven Central when this was written)
# with their runtime dependencies and a log4j2 binding for slf4j into
# $WEIR_KAFKA_HOME/libs (default ~/.cache/weir/kafka-VERSION); a complete
# copy is reused. It needs java and mvn and Maven Central once.
#
# fetch-frameworks copies, the same way, what a Kafka distribution runs
# Kafka Connect and Kafka Streams applications with: connect-runtime,
# connect-file (the FileStream connectors), connect-json, kafka-streams
# (with rocksdbjni) and the same slf4j binding, at KAFKA_VERSION, into
# $WEIR_KAFKA_HOME/frameworks. The integration tests run Connect's
# distributed worker and a Streams application from it.
#
# Each node runs both KRaft roles (process.roles=broker,controller), with a
# static quorum of the three (controller.quorum.voters), like a small
# production cluster without dedicated controllers. Everything else is
# Kafka's default, including no fsync on produce (log.flush.* unset: Kafka
# relies on replication and the page cache, where weir fsyncs), and the heap
# of kafka-server-start.sh (-Xmx1G -Xms1G) with kafka-run-class.sh's G1
# flags. Nodes run java directly, so each node's pid is the JVM's.
#
# KAFKA_NODES=1 runs node 0 alone, broker and controller in one process,
# the quorum being just itself; as in Kafka's own single-node
# config/server.properties, its internal topics (offsets, transaction and
# share-group state) get replication factor 1 and min ISR 1. The same
# KAFKA_NODES must be set for every command on a DIR.
#
# DIR gets: brokers (the bootstrap list), nodeN.properties, nodeN/data
# (log.dirs), nodeN.log (stdout and the log4j console), nodeN.pid. Only
# processes whose pid files are in DIR are ever signalled.
#
# Environment: KAFKA_VERSION, WEIR_KAFKA_HOME, KAFKA_READY_TIMEOUT (120 s
# for every node to log that it started), KAFKA_STOP_TIMEOUT (30 s from
# SIGTERM to SIGKILL), KAFKA_FETCH_TIMEOUT (600 s for mvn), KAFKA_HEAP_OPTS,
# KAFKA_NODES (3, or 1 for a single combined node).
set -euo pipefail

version=${KAFKA_VERSION:-4.1.2}
home=${WEIR_KAFKA_HOME:-${HOME:-/tmp}/.cache/weir/kafka-$version}
libs=$home/libs
frameworks=$home/frameworks
ready_timeout=${KAFKA_READY_TIMEOUT:-120}
stop_timeout=${KAFKA_STOP_TIMEOUT:-30}
fetch_timeout=${KAFKA_FETCH_TIMEOUT:-600}
heap_opts=${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}
case ${KAFKA_NODES:-3} in
3) nodes=(0 1 2) ;;
1) nodes=(0) ;;
*)
	echo "kafka.sh: KAFKA_NODES must be 1 or 3, got '${KAFKA_NODES}'" >&2
	exit 2
	;;
esac

die() {
	echo "kafka.sh: $*" >&2
	exit 1
}

# mvn_fetch NAME DIR DEPS JAR...: copies the runtime closure of DEPS
# (pom <dependency> elements) into DIR with mvn, bounded by
# KAFKA_FETCH_TIMEOUT, and fails unless every JAR (a file name) is among
# them. A marker written last names a finished copy, which is reused; a
# copy cut short is redone.
mvn_fetch() {
	local name=$1 dir=$2 deps=$3
	shift 3
	if [ -f "$dir/.complete-$version" ]; then
		echo "kafka.sh: $name $version jars present in $dir"
		return 0
	fi
	command -v java >/dev/null || die "java is needed (JDK 17+)"
	command -v mvn >/dev/null || die "mvn is needed to fetch $name's jars"
	command -v timeout >/dev/null || die "timeout is needed"
	local tmp jar rc=0
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/weir-kafka-fetch.XXXXXX")
	cat >"$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.weir.bench</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
$deps
  </dependencies>
  <properties><log4j.version>${KAFKA_LOG4J_VERSION:-2.25.3}</log4j.version></properties>
</project>
EOF
	echo "kafka.sh: fetching $name $version with mvn into $dir"
	mkdir -p "$(dirname "$dir")"
	rm -rf "$dir.partial"
	timeout -k 10 "$fetch_timeout" mvn -q -B -Dstyle.color=never -f "$tmp/pom.xml" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir.partial" \
		>"$tmp/mvn.log" 2>&1 || rc=$?
	for jar in "$@"; do
		[ "$rc" -ne 0 ] || [ -f "$dir.partial/$jar" ] || rc=1
	done
	if [ "$rc" -ne 0 ]; then
		echo "kafka.sh: mvn could not fetch $name $version (exit $rc); last lines:" >&2
		tail -n 15 "$tmp/mvn.log" >&2 || true
		rm -rf "$tmp" "$dir.partial"
		return 1
	fi
	rm -rf "$tmp" "$dir"
	mv "$dir.partial" "$dir"
	touch "$dir/.complete-$version"
	echo "kafka.sh: $name $version: $(find "$dir" -name '*.jar' | wc -l) jars in $dir"
}

# kafka_dep ARTIFACT: a dependency on org.apache.kafka:ARTIFACT:$version.
kafka_dep() {
	echo "    <dependency><groupId>org.apache.kafka</groupId><artifactId>$1</artifactId><version>$version</version></dependency>"
}

# Kafka 4 logs through slf4j 1.7 to log4j2; the binding is not a
# dependency of Kafka's jars (the distribution adds it), so it is named
# here, at the log4j version Kafka $version depends on.
# shellcheck disable=SC2016 # ${log4j.version} is the pom's property, for mvn
slf4j_binding='    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>${log4j.version}</version></dependency>'

fetched() { [ -f "$libs/.complete-$version" ]; }

fetch() {
	mvn_fetch Kafka "$libs" "$(kafka_dep kafka_2.13)
$(kafka_dep kafka-tools)
$slf4j_binding" "kafka_2.13-$version.jar" "kafka-tools-$version.jar"
}

fetch_frameworks() {
	mvn_fetch "Kafka Connect and Streams" "$frameworks" "$(kafka_dep connect-runtime)
$(kafka_dep connect-file)
$(kafka_dep connect-json)
$(kafka_dep kafka-streams)
$slf4j_binding" "connect-runtime-$version.jar" "connect-file-$version.jar" \
		"connect-json-$version.jar" "kafka-streams-$version.jar"
}

need_libs() {
	fetched || die "Kafka $version jars missing in $libs; run '$0 fetch' first"
	command -v java >/dev/null || die "java is needed (JDK 17+)"
}

kjava() { java -cp "$libs/*" "$@"; }

pid_file() { echo "$1/node$2.pid"; }

# node_pid DIR N prints node N's pid if its pid file names a live Kafka
# JVM started for DIR; a stale pid file is removed.
node_pid() {
	local f pid
	f=$(pid_file "$1" "$2")
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "kafka.Kafka $1/node$2.properties"; then
		echo "$pid"
		return 0
	fi
	rm -f "$f"
	return 1
}

write_config() {
	local dir=$1 ports voters n k=${#nodes[@]}
	# Two distinct free ports per node (the Kafka listeners, then the
	# controller listeners), all held open until every one is bound.
	read -r -a ports < <(python3 -c '
import socket, sys
ss = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss: s.close()' $((2 * k)))
	voters=""
	for n in "${nodes[@]}"; do voters="${voters:+$voters,}$n@127.0.0.1:${ports[$((k + n))]}"; done
	for n in "${nodes[@]}"; do
		mkdir -p "$dir/node$n/data"
		cat >"$dir/node$n.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:${ports[$n]},CONTROLLER://127.0.0.1:${ports[$((k + n))]}
advertised.listeners=PLAINTEXT://127.0.0.1:${ports[$n]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/node$n/data
EOF
		if [ "$k" = 1 ]; then
			cat >>"$dir/node$n.properties" <<'EOF'
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
		fi
	done
	for n in "${nodes[@]}"; do echo "127.0.0.1:${ports[$n]}"; done | paste -sd, - >"$dir/brokers"
	# Kafka's own config/log4j2.yaml logs INFO to the console and files;
	# the console alone is enough here, one file per node.
	cat >"$dir/log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
EOF
}

start_node() {
	local dir=$1 n=$2 pid
	if pid=$(node_pid "$dir" "$n"); then
		die "node $n is already running (pid $pid)"
	fi
	# Where this start's log begins: wait_started looks only past it, so
	# a restart is not taken as started by the previous run's line.
	if [ -f "$dir/node$n.log" ]; then wc -c <"$dir/node$n.log" >"$dir/node$n.logpos"; else echo 0 >"$dir/node$n.logpos"; fi
	# shellcheck disable=SC2086 # heap_opts is a list of JVM flags
	java $heap_opts -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
		-XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$dir/log4j2.properties" \
		-cp "$libs/*" kafka.Kafka "$dir/node$n.properties" </dev/null >>"$dir/node$n.log" 2>&1 &
	echo $! >"$(pid_file "$dir" "$n")"
}

# wait_started DIR N...: every node logged that it started, bounded.
wait_started() {
	local dir=$1 n pending deadline=$((SECONDS + ready_timeout))
	shift
	while :; do
		pending=()
		for n in "$@"; do
			node_pid "$dir" "$n" >/dev/null || {
				echo "kafka.sh: node $n exited while starting; last lines of $dir/node$n.log:" >&2
				tail -n 30 "$dir/node$n.log" >&2 || true
				return 1
			}
			tail -c +"$(($(cat "$dir/node$n.logpos" 2>/dev/null || echo 0) + 1))" "$dir/node$n.log" 2>/dev/null |
				grep -q 'Kafka Server started' || pending+=("$n")
		done
		[ ${#pending[@]} -eq 0 ] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "kafka.sh: node(s) ${pending[*]} not started within ${ready_timeout}s" >&2
			return 1
		fi
		sleep 0.2
	done
}

start() {
	local dir=$1 n cid
	need_libs
	mkdir -p "$dir"
	for n in "${nodes[@]}"; do
		if node_pid "$dir" "$n" >/dev/null; then die "node $n already running in $dir; run '$0 stop $dir' first"; fi
	done
	write_config "$dir"
	cid=$(kjava kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
	[[ "$cid" =~ ^[A-Za-z0-9_-]{22}$ ]] || die "StorageTool random-uuid gave '$cid'"
	echo "$cid" >"$dir/cluster-id"
	for n in "${nodes[@]}"; do
		kjava -Dlog4j2.configurationFile="$dir/log4j2.properties" kafka.tools.StorageTool format \
			-t "$cid" -c "$dir/node$n.properties" >>"$dir/node$n.log" 2>&1 ||
			die "formatting node $n failed; see $dir/node$n.log"
	done
	for n in "${nodes[@]}"; do start_node "$dir" "$n"; done
	if ! wait_started "$dir" "${nodes[@]}"; then
		stop "$dir" || true
		exit 1
	fi
	if [ ${#nodes[@]} = 1 ]; then
		echo "kafka.sh: Kafka $version, 1 node (broker+controller), bootstrap $(cat "$dir/brokers"), logs in $dir"
	else
		echo "kafka.sh: Kafka $version, 3 nodes (broker+controller each), bootstrap $(cat "$dir/brokers"), logs in $dir"
	fi
}

# stop_nodes DIR N...: SIGTERM (SIGKILL with --kill) the given nodes and
# wait, SIGKILL whatever outlives the bound.
stop_nodes() {
	local dir=$1 sig=TERM n pid entry deadline failed=0
	shift
	if [ "${1:-}" = --kill ]; then
		sig=KILL
		shift
	fi
	local pids=()
	for n in "$@"; do
		if pid=$(node_pid "$dir" "$n"); then
			kill -"$sig" "$pid" 2>/dev/null || true
			pids+=("$n:$pid")
		fi
	done
	deadline=$((SECONDS + stop_timeout))
	for entry in "${pids[@]}"; do
		n=${entry%%:*} pid=${entry#*:}
		while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "kafka.sh: node $n (pid $pid) still running ${stop_timeout}s after SIG$sig; sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
			for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			failed=1
		fi
		rm -f "$(pid_file "$dir" "$n")"
	done
	return "$failed"
}

stop() { stop_nodes "$1" "${nodes[@]}"; }

node_arg() {
	if [ ${#nodes[@]} = 1 ]; then
		[ "${1:-}" = 0 ] || die "node must be 0 (KAFKA_NODES=1), got '${1:-}'"
	else
		[[ "${1:-}" =~ ^[012]$ ]] || die "node must be 0, 1 or 2, got '${1:-}'"
	fi
}

case "${1:-}" in
fetch) fetch ;;
libs) echo "$libs" ;;
fetch-frameworks) fetch_frameworks ;;
frameworks) echo "$frameworks" ;;
version) echo "$version" ;;
start)
	[ -n "${2:-}" ] || die "usage: $0 start DIR"
	start "$2"
	;;
stop)
	[ -n "${2:-}" ] || die "usage: $0 stop DIR"
	stop "$2"
	;;
kill-node)
	[ -n "${2:-}" ] || die "usage: $0 kill-node DIR N"
	node_arg "${3:-}"
	stop_nodes "$2" --kill "$3"
	;;
start-node)
	[ -n "${2:-}" ] || die "usage: $0 start-node DIR N"
	node_arg "${3:-}"
	need_libs
	start_node "$2" "$3"
	wait_started "$2" "$3"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
