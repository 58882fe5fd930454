# weir — a Kafka-compatible broker.
#
#   make run     single-node broker on 127.0.0.1:9092, data in ./data (a new cluster starts with fetch read coalescing on; COALESCING=false: off)
#   make cluster [RACKS=a,b,c]  3-broker cluster on loopback (Kafka 9092-9094); RACKS: one rack per broker, in node order; COALESCING as for run
#   make cluster-stop  stop it
#   make test    everything CI runs: vet, unit tests with -race, integration
#   make bench   Go benchmarks and an end-to-end weirctl bench run
#   make bench-replication  acks=-1 produce, RF1 vs RF3, on a fresh 3-broker cluster
#   make bench-fanout  fetch read coalescing off vs on: 64 consumers tailing (Java defaults and batched), 1 tailing, 64 from a backlog
#   make bench-memory  broker memory with the fetch memory budget on vs off: 200 consumers fetching a 2 GiB backlog at once
#   make bench-scale  what partitions cost, weir beside Apache Kafka 4.1 (KRaft, jars fetched with mvn): memory, fds, disk, idle CPU, create, failover, produce (PARTITIONS, BASELINE_REF)
#   make bench-produce  produce throughput, latency and broker CPU per MB, weir beside Apache Kafka 4.1, one broker and three, Java and weirctl clients (SYSTEMS, SETUPS)
#   make compat  franz-go's kgo integration suite against a fresh weir
#   make compat-cluster  the same against a fresh 3-broker cluster, topics with 3 replicas
#   make chaos   fault injection on a 3-broker cluster, then every replica checked (CHAOS_DURATION, CHAOS_SEED)
#   make fuzz    every fuzz target, FUZZ_TIME each (default 30s)
#   make soak    thousands of connections and hundreds of partitions for SOAK_DURATION (default 10m), growth verdict

GO       ?= go
BIN      := bin
DATA_DIR ?= ./data
BENCH_RECORDS ?= 500000
BENCH_RECORD_SIZE ?= 1024
BENCH_REPLICATION_RECORDS ?= 200000

.PHONY: all build run cluster cluster-stop test unit integration bench bench-go bench-e2e bench-replication bench-fanout bench-fetch-sessions bench-memory bench-scale bench-produce compat compat-short compat-cluster chaos fuzz soak lint fmt clean

all: build

build:
	$(GO) build -o $(BIN)/weir ./cmd/weir
	$(GO) build -o $(BIN)/weirctl ./cmd/weirctl

# A cluster made by make run or make cluster starts with fetch read
# coalescing on (an enterprise feature, covered by the new cluster's 30-day
# trial): with many consumers of a partition it saves CPU and log reads,
# and with one it costs nothing measurable (docs/coalescing.md,
# "Recommendation"). COALESCING=false starts one without it. It applies when
# the cluster is created; an existing data directory keeps its setting.
COALESCING ?= true

run: build
	./$(BIN)/weir --data-dir $(DATA_DIR) --set cluster.kafka_fetch_read_coalescing_enabled=$(COALESCING)

# Three brokers on loopback (Kafka 9092-9094), data and logs in ./data/nodeN.
# RACKS=a,b,c gives node N the N-th rack (--rack); empty: no racks. A list
# of any other length is refused before anything starts.
RACKS ?=
cluster:
	RACKS='$(RACKS)' COALESCING='$(COALESCING)' ./.ci/cluster.sh start

cluster-stop:
	./.ci/cluster.sh stop

test: lint unit integration

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /integration)
	# The license test key is trusted only in builds with this tag.
	$(GO) test -race -count=1 -tags weirtestlicense ./config
	# The fault-injection suite's unsynced-write file system exists only
	# in builds with this tag.
	$(GO) test -race -count=1 -tags weirchaos -run Unsynced ./cmd/weir

# The integration tests' brokers are built with weirtestlicense (they trust
# the test license key and take a shifted clock from WEIR_TEST_CLOCK_FILE);
# make build and the Dockerfile never set it.
integration:
	./.ci/test-deps.sh
	$(GO) test -count=1 -timeout 30m -tags weirtestlicense ./integration/...

bench: bench-go bench-e2e

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./log/ ./broker/... ./kafka/ ./raft/

bench-e2e: build
	./.ci/bench-e2e.sh $(BENCH_RECORDS) $(BENCH_RECORD_SIZE)

# What replication costs: bench produce (acks=-1) to RF=1 and RF=3 topics on
# a fresh three-broker cluster on free loopback ports, alternating, with
# RF3/RF1 ratios. Not part of make bench.
bench-replication: build
	./.ci/bench-replication.sh $(BENCH_REPLICATION_RECORDS) $(BENCH_RECORD_SIZE)

# Fetch read coalescing off vs on, side by side in one run
# (docs/coalescing.md). Not part of make bench: it takes a few minutes.
bench-fanout: build
	./.ci/bench-fanout.sh

# What an idle consumer of 1,000 partitions costs with fetch sessions
# (KIP-227) and without, side by side in one run (docs/architecture.md).
# Not part of make bench: it takes a few minutes.
bench-fetch-sessions: build
	./.ci/bench-fetch-sessions.sh

# Broker memory under a fetch storm (200 consumers, each asking for 50 MiB of
# a 2 GiB backlog at once, with producers and a stalled consumer), with
# fetch_memory_budget_bytes at 256 MiB and then off, on the same data; peak
# RSS (sampled and VmHWM) side by side. Not part of make bench: it takes
# several minutes and several GiB of memory with the budget off.
bench-memory: build
	./.ci/bench-memory.sh

# What partitions cost a three-broker cluster (RF=3), weir and Apache Kafka
# 4.1 (KRaft; .ci/kafka.sh fetches its jars once with mvn, and without them
# weir alone is measured) on this machine in one run with the same client:
# RSS, threads, fds, disk and idle CPU per replica, time to create N
# partitions, to fail over and to rejoin, and acks=all produce throughput.
# Settings come from the environment or the make command line, e.g.
# make bench-scale PARTITIONS=500 or BASELINE_REF=HEAD (also measures weir
# as built from that ref); .ci/bench-scale.sh lists them all. Not part of
# make bench: it takes 15 to 40 minutes.
bench-scale: build
	./.ci/bench-scale.sh

# Produce performance, weir beside Apache Kafka 4.1 (KRaft; jars fetched
# once with mvn by .ci/kafka.sh, and without them weir alone is measured)
# on this machine in one run, with the same workloads and clients: Kafka's
# ProducerPerformance (acks=all, acks=1, a fixed 20 MB/s) and concurrent
# weirctl bench produce, on one broker (RF=1) and on three (RF=3), each on a
# fresh broker or cluster: MB/s, p50/p99/p99.9 latency, broker CPU seconds
# and CPU per MB. Settings come from the environment or the make command
# line, e.g. make bench-produce SYSTEMS=weir SETUPS=single;
# .ci/bench-produce.sh lists them all. Not part of make bench.
bench-produce: build
	./.ci/bench-produce.sh

# franz-go's own kgo integration tests against a fresh weir, with an
# allowlist (integration/compat/kgo/allow.txt) and findings
# (integration/compat/FINDINGS.md). The short subset also runs in make test.
compat:
	./.ci/compat.sh

compat-short:
	./.ci/compat.sh --short

compat-cluster:
	./.ci/compat.sh --brokers 3

# The fault-injection suite with a long schedule (docs/reliability.md); a
# 20 s schedule of it runs in make test.
CHAOS_DURATION ?= 10m
CHAOS_SEED ?=
chaos:
	./.ci/chaos.sh $(CHAOS_DURATION) $(CHAOS_SEED)

# Every fuzz target in the module for FUZZ_TIME each, stopping at the first
# crash; the committed seed corpora run in make test as plain tests.
FUZZ_TIME ?= 30s
fuzz:
	./.ci/fuzz.sh $(FUZZ_TIME)

# A soak run against a fresh broker: growth of RSS, goroutines and heap after
# warm-up, and every record delivered.
SOAK_DURATION ?= 10m
soak:
	./.ci/soak.sh $(SOAK_DURATION)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
