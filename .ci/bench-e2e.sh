#!/usr/bin/env bash
# End-to-end benchmark: start a fresh single-node broker on free loopback
# ports, run weirctl bench produce and consume against it, stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-500000}
size=${2:-1024}
. ./.ci/single-broker.sh
start_single_broker
brokers="127.0.0.1:$kport"
echo "== weirctl bench produce: $records records of $size bytes, 3 partitions"
./bin/weirctl --brokers "$brokers" bench produce bench --records "$records" --record-size "$size" --partitions 3
echo "== weirctl bench consume: $records records"
./bin/weirctl --brokers "$brokers" bench consume bench --records "$records"
