#!/usr/bin/env bash
# Runs every fuzz target in the module, one after another, each for a
# bounded time, and stops at the first failure, printing where the failing
# input was written (it is then run by plain go test as a regression test;
# commit it with the fix). docs/reliability.md describes the targets.
#
#   .ci/fuzz.sh [duration]   time per target, as go test -fuzztime takes
#                            it (30s, 5m, 2h or 100000x); default 30s
#
# FUZZ_PARALLEL sets the fuzzing workers per target (go test -parallel);
# unset, Go uses one per CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-30s}
go=${GO:-go}

# The test binary's timeout: the fuzzing time, plus room for building the
# instrumented binary and running the seed corpus; an iteration count
# (100000x) gets an hour.
seconds_of() {
	case $1 in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*x) echo 3600 ;;
	*) return 1 ;;
	esac
}
if ! fuzz_seconds=$(seconds_of "$duration") || ! [[ $fuzz_seconds =~ ^[0-9]+$ ]]; then
	echo "fuzz: duration $duration: want a whole number with s, m, h or x" >&2
	exit 2
fi
timeout="$((fuzz_seconds + 600))s"

parallel=()
if [ -n "${FUZZ_PARALLEL:-}" ]; then
	parallel=(-parallel "$FUZZ_PARALLEL")
fi

# Packages whose tests declare a fuzz target; go test -list then names the
# targets exactly as the test binary sees them.
targets=()
while read -r dir pkg; do
	if ! grep -qs '^func Fuzz' "$dir"/*_test.go; then
		continue
	fi
	if ! names=$($go test -list '^Fuzz' "$pkg"); then
		echo "fuzz: listing the fuzz targets of $pkg failed" >&2
		exit 1
	fi
	for name in $names; do
		case $name in
		Fuzz*) targets+=("$pkg $dir $name") ;;
		esac
	done
done < <($go list -f '{{.Dir}} {{.ImportPath}}' ./...)

if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} targets, $duration each"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in "${targets[@]}"; do
	read -r pkg dir name <<<"$target"
	echo "== $name ($pkg)"
	if $go test -run '^$' -fuzz "^$name\$" -fuzztime "$duration" -timeout "$timeout" "${parallel[@]}" "$pkg" 2>&1 | tee "$log"; then
		continue
	fi
	echo
	echo "fuzz: $name failed"
	crasher=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log" | tail -n 1)
	if [ -n "$crasher" ]; then
		rel=${dir#"$PWD"/}
		echo "fuzz: failing input written to $rel/$crasher"
		echo "fuzz: re-run it with: $go test -run '^$name/${crasher##*/}\$' $pkg"
	fi
	exit 1
done
echo "fuzz: all ${#targets[@]} targets ran $duration without a failure"
