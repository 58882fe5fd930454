// Package chaos is weir's fault-injection suite: a Jepsen-style test that
// runs a three-broker cluster under a seeded schedule of faults (kill -9 of
// partition and controller leaders, SIGSTOP/SIGCONT, restart with a wiped
// data directory, network partitions between brokers, a partition's
// replica reassigned away and back) while idempotent
// producers and a consumer group record what the cluster acknowledged and
// served, then heals the cluster and checks every replica's log against that
// history. Beside them, transactional consume-transform-produce workers
// (txn_workload.go) run under faults aimed at their transaction
// coordinators and output leaders too, and txn_checker.go checks the
// output's read_committed views: no aborted record, whole transactions,
// every input record reflected exactly once, nothing served past the last
// stable offset, no transaction left open past its timeout.
//
// The package cannot use the test harness of package integration (test files
// of another package), so it has a small process controller of its own:
// build.go builds the broker, node.go runs one broker process, cluster.go a
// cluster of them, and network.go places them either on loopback or, when
// running as root with ip(8), each in its own network namespace on a private
// bridge, which is what makes partitions between brokers possible. All
// traffic stays on this machine: on loopback, or on veth links between
// namespaces the test creates and removes.
//
// The default run (go test, make test) is short; WEIR_CHAOS_DURATION and
// WEIR_CHAOS_SEED select a longer or a repeated schedule (make chaos).
package chaos
