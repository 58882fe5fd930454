#!/usr/bin/env bash
# Fetch read coalescing, measured: a fresh single-node broker on free
# loopback ports, then weirctl bench fanout with coalescing off and on side
# by side (alternating, --runs each, ratios of medians) in four workloads:
# N consumers tailing a producer with the Java consumer's default fetch
# settings (fetch.min.bytes 1, fetch.max.wait.ms 500: what users run, the
# headline), one consumer tailing (what coalescing costs when nothing is
# shared), N consumers reading a backlog from the start, and N consumers
# tailing with batched fetches (fetch.min.bytes 64 KiB, at most 100 ms
# apart), as consumers of a busy partition may be configured.
#
#   .ci/bench-fanout.sh [consumers] [records/s] [duration] [runs]   (64 2000 15s 3)
set -euo pipefail
cd "$(dirname "$0")/.."
consumers=${1:-64}
rate=${2:-2000}
duration=${3:-15s}
runs=${4:-3}
. ./.ci/single-broker.sh
start_single_broker
ctl=(./bin/weirctl --brokers "127.0.0.1:$kport" bench fanout --admin-url "http://127.0.0.1:$aport" --coalescing both --runs "$runs")
# The producer lingers 5 ms (linger.ms, the Java client's default since 4.0).
echo "== tail: $consumers consumers, $rate records/s of 1 KiB for $duration, Java consumer defaults (fetch.min.bytes 1, fetch.max.wait.ms 500)"
"${ctl[@]}" fanout-tail-defaults --mode tail --consumers "$consumers" --rate "$rate" --record-size 1024 --duration "$duration" \
	--fetch-min-bytes 1 --fetch-max-wait 500ms 2>/dev/null
echo "== tail: 1 consumer, $rate records/s of 1 KiB for $duration, Java consumer defaults"
"${ctl[@]}" fanout-single --mode tail --consumers 1 --rate "$rate" --record-size 1024 --duration "$duration" \
	--fetch-min-bytes 1 --fetch-max-wait 500ms 2>/dev/null
echo "== preload: $consumers consumers read 50000 records of 1 KiB from the start"
"${ctl[@]}" fanout-preload --mode preload --consumers "$consumers" --records 50000 --record-size 1024 2>/dev/null
echo "== tail: $consumers consumers, $rate records/s of 1 KiB for $duration, batched fetches (fetch.min.bytes 64 KiB, fetch.max.wait.ms 100)"
"${ctl[@]}" fanout-tail --mode tail --consumers "$consumers" --rate "$rate" --record-size 1024 --duration "$duration" \
	--fetch-min-bytes 65536 --fetch-max-wait 100ms 2>/dev/null
