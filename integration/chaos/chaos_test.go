package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The default run is short enough for make test (the nemesis goes on past
// it until every fault kind ran once: about 50-60 s); make chaos sets these.
const (
	defaultDuration = 20 * time.Second
	envDuration     = "WEIR_CHAOS_DURATION"
	envSeed         = "WEIR_CHAOS_SEED"
	// envKeep names a directory where the brokers' logs of a failed run
	// are copied (default: a new directory under the system's temp).
	envKeep = "WEIR_CHAOS_KEEP"
)

const (
	chaosTopic = "chaos"
	// defaultChaosPartitions: hundreds, so that faults hit a broker that
	// carries many Raft groups over its shared transport and log, as a
	// production broker does; WEIR_CHAOS_PARTITIONS sets another count.
	defaultChaosPartitions = 200
	envPartitions          = "WEIR_CHAOS_PARTITIONS"
	chaosGroup             = "chaos-group"
	convergeTimeout        = 60 * time.Second
)

// chaosPartitionCount is the workload topic's partition count.
func chaosPartitionCount(t *testing.T) int32 {
	v := os.Getenv(envPartitions)
	if v == "" {
		return defaultChaosPartitions
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive count", envPartitions, v)
	}
	return int32(n)
}

func chaosSettings(t *testing.T) (time.Duration, uint64) {
	d := defaultDuration
	if v := os.Getenv(envDuration); v != "" {
		parsed, err := time.ParseDuration(v)
		if err != nil || parsed <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 10m", envDuration, v)
		}
		d = parsed
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envSeed); v != "" {
		parsed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", envSeed, v)
		}
		seed = parsed
	}
	return d, seed
}

// chaosNetwork is the namespace network when it can be had (root, ip),
// otherwise loopback without partitions.
func chaosNetwork(t *testing.T, rng *rand.Rand) Network {
	if err := NamespacesAvailable(); err != nil {
		t.Logf("network partitions skipped: %v; the brokers run on loopback", err)
	} else {
		netw, err := NewNamespaceNetwork(3, rng, t.Logf)
		if err == nil {
			return netw
		}
		t.Logf("network partitions skipped: setting up network namespaces failed: %v; the brokers run on loopback", err)
	}
	netw, err := NewLoopbackNetwork(3, rng)
	if err != nil {
		t.Fatalf("choosing loopback ports: %v", err)
	}
	return netw
}

// TestChaos runs the workload on a three-broker cluster under the
// nemesis, heals the cluster and checks every replica's log against what
// the clients were told. See doc.go and docs/reliability.md.
func TestChaos(t *testing.T) {
	duration, seed := chaosSettings(t)
	chaosPartitions := chaosPartitionCount(t)
	t.Logf("chaos: seed %d, nemesis for %v, %d partitions (rerun: %s=%d %s=%v)", seed, duration, chaosPartitions, envSeed, seed, envDuration, duration)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()

	// weirchaos: the brokers can lose their unsynced log writes at a
	// restart (FaultCrashUnsynced).
	bin, err := BuildBroker(t.TempDir(), "weirchaos")
	if err != nil {
		t.Fatal(err)
	}
	netw := chaosNetwork(t, rng)
	t.Cleanup(func() {
		if err := netw.Close(); err != nil {
			t.Errorf("removing the test network: %v", err)
		}
	})
	t.Logf("network: %s", netw.Describe())

	dataDir := t.TempDir()
	c, err := StartCluster(ctx, ClusterConfig{Brokers: 3, Bin: bin, Dir: dataDir, Net: netw, Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	t.Cleanup(func() {
		c.StopAll()
		if t.Failed() {
			keepLogs(t, c, seed)
		}
	})
	if err := c.CreateTopic(ctx, chaosTopic, chaosPartitions, 3); err != nil {
		t.Fatal(err)
	}

	h := NewHistory()
	w := Workload{
		Topic: chaosTopic, Partitions: chaosPartitions, Group: chaosGroup,
		Producers: 2, Consumers: 2, Pace: 10 * time.Millisecond, MaxInFlight: 100,
	}
	run, err := w.Start(c, h, t.Logf)
	if err != nil {
		t.Fatalf("starting the workload: %v", err)
	}
	defer run.Close()
	waitFor(t, 30*time.Second, "the first 100 acknowledged and consumed records", func() bool {
		return h.Acked() >= 100 && h.Seen() >= 100
	})
	// Consume-transform-produce in transactions beside it
	// (txn_workload.go), with faults of its own.
	txn := startTxn(t, c)
	txn.waitStarted(t)

	nm := NewNemesis(c, seed, chaosTopic, chaosPartitions, t.Logf)
	nm.Txn = txn.targets()
	if !netw.CanPartition() {
		t.Logf("nemesis without network partitions: %v", errNoPartitions)
	}
	start := time.Now()
	nm.Run(ctx, duration)
	t.Logf("nemesis done after %v: %v", time.Since(start).Round(time.Second), nm.Counts)

	if err := c.WaitHealthy(ctx, []string{chaosTopic, txnInput, txnOutput, transactionStateTopic}, healTimeout); err != nil {
		t.Fatalf("after the nemesis: %v", err)
	}
	healedAt := time.Now()
	// A little traffic on the healed cluster, then drain.
	acked := h.Acked()
	waitFor(t, 30*time.Second, "records acknowledged by the healed cluster", func() bool { return h.Acked() >= acked+50 })
	run.StopProducers()
	txn.run.StopFeeder()
	waitGroupDrained(t, c)
	run.StopConsumers()
	txn.drain(t, c)
	txnOpen := txn.startPollOpen(t, c, healedAt)

	final := finalCommitted(t, c)
	topicID, err := c.TopicID(ctx, chaosTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := c.WaitLogsConverge(ctx, chaosTopic, topicID, chaosPartitions, convergeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	logs := map[int32]replicaLogs{}
	for p := range chaosPartitions {
		logs[p] = replicaLogs{}
		for _, n := range c.Nodes {
			recs, err := c.ReadReplicaLog(ctx, n.ID, chaosTopic, topicID, p, ends[p])
			if err != nil {
				t.Fatalf("reading node %d's copy of %s/%d: %v", n.ID, chaosTopic, p, err)
			}
			logs[p][n.ID] = recs
		}
	}
	t.Logf("replica logs read: ends %v", ends)

	report := Check(h, logs, final)
	t.Logf("nemesis events:\n  %s", strings.Join(nm.Events, "\n  "))
	t.Logf("summary (%v of nemesis, %s):\n%s", duration, netw.Describe(), report.Table(seed, nm.Counts, nm.Kinds()))
	if nm.HealFailures > 0 {
		t.Logf("the cluster failed to heal within %v after a fault %d time(s); see the events", healTimeout, nm.HealFailures)
	}
	if report.Acked == 0 || report.Consumed == 0 || report.Commits == 0 {
		t.Errorf("the workload did not run: %d acknowledged, %d consumed, %d commits", report.Acked, report.Consumed, report.Commits)
	}
	if !report.OK() {
		t.Errorf("invariants violated (seed %d):\n  %s", seed, strings.Join(report.Violations, "\n  "))
	}
	txn.check(t, c, healedAt, nm.Counts, txnOpen())
}

// drainTimeout bounds waiting for the consumer group to commit the end of
// every partition once production stopped.
const drainTimeout = 60 * time.Second

// waitGroupDrained waits until the group's committed offsets reach every
// partition's end: the consumers read, and committed, everything.
func waitGroupDrained(t *testing.T, c *Cluster) {
	cl, err := kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last string
	waitFor(t, drainTimeout, "the consumer group committing the end of every partition", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, chaosTopic)
		if err != nil {
			last = err.Error()
			return false
		}
		committed, err := adm.FetchOffsets(ctx, chaosGroup)
		if err != nil {
			last = err.Error()
			return false
		}
		drained := true
		var desc []string
		ends.Each(func(o kadm.ListedOffset) {
			at, _ := committed.Lookup(chaosTopic, o.Partition)
			desc = append(desc, fmt.Sprintf("%d: %d/%d", o.Partition, at.At, o.Offset))
			if o.Err != nil || at.Err != nil || at.At < o.Offset {
				drained = false
			}
		})
		last = strings.Join(desc, ", ")
		return drained
	}, func() string { return "committed/end " + last })
}

// finalCommitted reads the group's committed offsets once the consumers
// have stopped.
func finalCommitted(t *testing.T, c *Cluster) map[int32]int64 {
	cl, err := kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, chaosGroup)
	if err != nil {
		t.Fatalf("reading the group's committed offsets: %v", err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("committed offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		if o.Topic == chaosTopic {
			out[o.Partition] = o.At
		}
	})
	return out
}

// waitFor polls cond every 100 ms until it holds or timeout passes; the
// optional detail says what was last seen.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			var extra []string
			for _, d := range detail {
				extra = append(extra, d())
			}
			t.Fatalf("%s: not within %v %s", what, timeout, strings.Join(extra, " "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keepLogs copies the brokers' logs of a failed run where they outlive
// the test's temporary directories, and prints their tails.
func keepLogs(t *testing.T, c *Cluster, seed uint64) {
	dir := os.Getenv(envKeep)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "weir-chaos-"+strconv.FormatUint(seed, 10))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping logs: %v", err)
	} else if paths, err := c.KeepLogs(dir); err != nil {
		t.Logf("keeping logs: %v", err)
	} else {
		t.Logf("broker logs kept: %v", paths)
	}
	t.Logf("%s", c.LogTails(16<<10))
}
