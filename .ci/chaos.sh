#!/usr/bin/env bash
# The fault-injection suite (integration/chaos) with a long schedule: a
# three-broker cluster under kill -9, SIGSTOP/SIGCONT, wiped restarts and
# (as root with ip(8)) network partitions, then every replica checked
# against what the clients were told. make test runs a short version.
#
#   .ci/chaos.sh [duration] [seed]        (default 10m, a seed from the clock)
#
# WEIR_CHAOS_DURATION and WEIR_CHAOS_SEED set the same; the seed is printed
# at the start, and running again with it repeats the schedule. The brokers'
# logs of a failed run are kept under $WEIR_CHAOS_KEEP (default
# /tmp/weir-chaos-<seed>).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-${WEIR_CHAOS_DURATION:-10m}}
seed=${2:-${WEIR_CHAOS_SEED:-}}

# go test's own timeout: the nemesis, plus the slack the last fault's
# healing, the drain and the checks may take.
nemesis_s=0
rest=$duration
while [[ $rest =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
	n=${BASH_REMATCH[1]}
	case ${BASH_REMATCH[2]} in
	h) nemesis_s=$((nemesis_s + n * 3600)) ;;
	m) nemesis_s=$((nemesis_s + n * 60)) ;;
	s) nemesis_s=$((nemesis_s + n)) ;;
	esac
	rest=${BASH_REMATCH[3]}
done
if [ -n "$rest" ] || [ "$nemesis_s" -le 0 ]; then
	echo "chaos: duration '$duration': want whole hours, minutes and seconds, such as 10m or 1h30m" >&2
	exit 2
fi
timeout_s=$((nemesis_s + 600))

export WEIR_CHAOS_DURATION=$duration
if [ -n "$seed" ]; then
	export WEIR_CHAOS_SEED=$seed
fi
echo "chaos: nemesis for $duration${seed:+, seed $seed} (go test timeout ${timeout_s}s)"
exec go test -count=1 -v -timeout "${timeout_s}s" -run '^TestChaos$' ./integration/chaos/
