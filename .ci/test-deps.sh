#!/usr/bin/env bash
# Installs optional tools used by the integration tests (kcat) and fetches
# the Apache Kafka jars the Kafka-tool, Connect and Streams tests run (with
# mvn, once; .ci/kafka.sh reuses a complete earlier copy). Fetching them
# here, before any test starts, keeps tests that run in parallel from
# fetching into the same Maven repository at once.
# Never fatal: tests that need a missing tool skip themselves with a message,
# and a test whose jars are missing fetches them itself (and reports why
# that failed).
set -u

log() { echo "test-deps: $*" >&2; }

install_kcat() {
	if command -v kcat >/dev/null 2>&1; then
		log "kcat present: $(command -v kcat)"
		return 0
	fi
	if command -v kafkacat >/dev/null 2>&1; then
		log "kafkacat present ($(command -v kafkacat)); kcat tests will use it"
		return 0
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		log "kcat missing and apt-get unavailable; kcat tests will be skipped"
		return 0
	fi
	if [ "$(id -u)" != "0" ]; then
		log "kcat missing and not root; kcat tests will be skipped"
		return 0
	fi
	log "installing kcat with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends kcat >/tmp/test-deps-apt.log 2>&1; then
		# The package lists may be missing or stale on a fresh machine.
		apt-get update >>/tmp/test-deps-apt.log 2>&1 || true
		if ! apt-get install -y --no-install-recommends kcat >>/tmp/test-deps-apt.log 2>&1; then
			log "could not install kcat (see /tmp/test-deps-apt.log); kcat tests will be skipped"
			return 0
		fi
	fi
	if command -v kcat >/dev/null 2>&1; then
		log "kcat installed: $(kcat -V 2>&1 | head -n1)"
	else
		log "apt-get succeeded but kcat is not on PATH; kcat tests will be skipped"
	fi
	return 0
}

fetch_kafka_jars() {
	if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
		log "java or mvn missing; the Kafka-tool, Connect and Streams tests will be skipped"
		return 0
	fi
	local script
	script="$(dirname "$0")/kafka.sh"
	for what in fetch fetch-frameworks; do
		if ! "$script" "$what" >/tmp/test-deps-kafka-$what.log 2>&1; then
			log "kafka.sh $what failed (see /tmp/test-deps-kafka-$what.log); the tests will try again"
		fi
	done
	log "Kafka jars ready: $("$script" libs)"
	return 0
}

install_kcat
fetch_kafka_jars
exit 0
