#!/usr/bin/env bash
# Fetch sessions (KIP-227), measured: a fresh single-node broker on free
# loopback ports, an idle topic of 1,000 partitions, then weirctl bench
# idle-fetch: one idle kgo consumer at the log end with fetch sessions on
# and off in the same run, request and response bytes per fetch and the
# broker's CPU per consumer-second (/proc/PID/stat, less the broker's CPU
# with no consumer).
#
#   .ci/bench-fetch-sessions.sh [partitions] [duration] [fetch max wait] [consumers] [rounds]   (1000 30s 500ms 1 2)
set -euo pipefail
cd "$(dirname "$0")/.."
partitions=${1:-1000}
duration=${2:-30s}
maxwait=${3:-500ms}
consumers=${4:-1}
rounds=${5:-2}
. ./.ci/single-broker.sh
start_single_broker
echo "== idle consumer of $partitions partitions, fetch max wait $maxwait, $duration per mode"
./bin/weirctl --brokers "127.0.0.1:$kport" bench idle-fetch idle --partitions "$partitions" \
	--duration "$duration" --fetch-max-wait "$maxwait" --broker-pid "$pid" --consumers "$consumers" --rounds "$rounds"
