#!/usr/bin/env bash
# Fetch read coalescing, measured: a fresh single-node broker on free
# loopback ports, then weirctl bench fanout with coalescing off and on side
# by side (alternating, --runs each) in three workloads: N consumers
# tailing a producer, N consumers reading a backlog, and one consumer
# tailing (the cost of coalescing when nothing is shared).
set -euo pipefail
cd "$(dirname "$0")/.."
consumers=${1:-64}
rate=${2:-2000}
duration=${3:-15s}
runs=${4:-2}
. ./.ci/single-broker.sh
start_single_broker
ctl=(./bin/weirctl --brokers "127.0.0.1:$kport" bench fanout --admin-url "http://127.0.0.1:$aport" --coalescing both --runs "$runs")
# The tailing consumers batch their fetches (fetch.min.bytes 64 KiB, at most
# 100 ms apart), as consumers of a busy partition are configured to; the
# producer lingers 5 ms (linger.ms, the Java client's default since 4.0).
echo "== tail: $consumers consumers, $rate records/s of 1 KiB for $duration, fetch.min.bytes 64 KiB, fetch.max.wait.ms 100"
"${ctl[@]}" fanout-tail --mode tail --consumers "$consumers" --rate "$rate" --record-size 1024 --duration "$duration" \
	--fetch-min-bytes 65536 --fetch-max-wait 100ms 2>/dev/null
echo "== preload: $consumers consumers read 50000 records of 1 KiB from the start"
"${ctl[@]}" fanout-preload --mode preload --consumers "$consumers" --records 50000 --record-size 1024 2>/dev/null
echo "== tail: 1 consumer, $rate records/s of 1 KiB for $duration"
"${ctl[@]}" fanout-single --mode tail --consumers 1 --rate "$rate" --record-size 1024 --duration "$duration" 2>/dev/null
