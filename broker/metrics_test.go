package broker

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/weir-broker/weir/broker/controller"
)

// openMetricsBroker opens a broker that registers its metrics on reg.
func openMetricsBroker(t *testing.T, reg prometheus.Registerer) *Broker {
	t.Helper()
	b, err := Open(Options{Node: testNode(t.TempDir()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// seriesValue gathers reg and returns the value of the gauge or counter
// series of family name whose labels include want, and whether there is
// one.
func seriesValue(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, want) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue(), true
				}
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}

// partitionGauges are the collector's partition gauges at one scrape.
type partitionGauges struct {
	leaderRole, followerRole, leaders, underReplicated, offline float64
}

func scrapePartitions(t *testing.T, reg prometheus.Gatherer) partitionGauges {
	t.Helper()
	get := func(name string, labels map[string]string) float64 {
		v, ok := seriesValue(t, reg, name, labels)
		if !ok {
			t.Fatalf("no %s%v series", name, labels)
		}
		return v
	}
	return partitionGauges{
		leaderRole:      get("weir_partitions", map[string]string{"role": "leader"}),
		followerRole:    get("weir_partitions", map[string]string{"role": "follower"}),
		leaders:         get("weir_partition_leaders", nil),
		underReplicated: get("weir_under_replicated_partitions", nil),
		offline:         get("weir_offline_partitions", nil),
	}
}

// totalPartitions counts every partition of every topic, internal ones
// included: a single broker hosts and leads them all.
func totalPartitions(b *Broker) float64 {
	n := 0
	for _, t := range b.Topics() {
		n += len(t.Partitions())
	}
	return float64(n)
}

// awaitPartitionGauges polls until the gauges match want, up to 10 s:
// a new partition serves once its group elected it and it applied its
// backlog, which the controller may learn first.
func awaitPartitionGauges(t *testing.T, reg prometheus.Gatherer, want partitionGauges) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := scrapePartitions(t, reg)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition gauges %+v, want %+v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMetricsPartitionGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := openMetricsBroker(t, reg)
	mustCreate(t, b, "metrics-a", 3, nil)
	mustCreate(t, b, "metrics-b", 2, nil)
	all := totalPartitions(b)
	awaitPartitionGauges(t, reg, partitionGauges{leaderRole: all, leaders: all})

	if err := b.DeleteTopic("metrics-a"); err != nil {
		t.Fatal(err)
	}
	awaitPartitionGauges(t, reg, partitionGauges{leaderRole: all - 3, leaders: all - 3})
}

func TestMetricsClusterConfigVersion(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := openMetricsBroker(t, reg)
	version := func() float64 {
		v, ok := seriesValue(t, reg, "weir_cluster_config_version", nil)
		if !ok {
			t.Fatal("no weir_cluster_config_version series")
		}
		return v
	}
	v0 := version()
	if v0 != float64(b.ClusterConfigVersion()) {
		t.Fatalf("weir_cluster_config_version %v, ClusterConfigVersion %d", v0, b.ClusterConfigVersion())
	}
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "fetch_max_bytes", Value: "2048"}}, false); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != v0+1 {
		t.Fatalf("weir_cluster_config_version %v after one batch of changes, want %v", v, v0+1)
	}
}

func TestMetricsWithoutRegisterer(t *testing.T) {
	b := openTestBroker(t, t.TempDir()) // no registerer
	b.registerMetrics()                 // nil registerer: nothing to do
	if got := b.partitionStats(time.Now()); got.leaders == 0 {
		t.Fatalf("partition stats %+v: the group topic's partitions are led here", got)
	}
}

func TestUnderReplicatedAndOfflineRules(t *testing.T) {
	liveSet := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	three := []int32{0, 1, 2}
	for _, tc := range []struct {
		name                     string
		cp                       controller.Partition
		live                     func(int32) bool
		underReplicated, offline bool
	}{
		{"all in sync", controller.Partition{Replicas: three, Leader: 0, LeaderTerm: 2, ISR: three}, liveSet(0, 1, 2), false, false},
		{"follower left the ISR", controller.Partition{Replicas: three, Leader: 0, LeaderTerm: 2, ISR: []int32{0, 2}}, liveSet(0, 1, 2), true, false},
		{"in the ISR but not live", controller.Partition{Replicas: three, Leader: 0, LeaderTerm: 2, ISR: three}, liveSet(0, 2), true, false},
		{"new leader, no ISR reported, all live", controller.Partition{Replicas: three, Leader: 1, LeaderTerm: 3}, liveSet(0, 1, 2), false, false},
		{"new leader, no ISR reported, one down", controller.Partition{Replicas: three, Leader: 1, LeaderTerm: 3}, liveSet(1, 2), true, false},
		{"single replica", controller.Partition{Replicas: []int32{4}, Leader: 4, LeaderTerm: 1, ISR: []int32{4}}, liveSet(4), false, false},
		{"never elected", controller.Partition{Replicas: three, Leader: 0}, liveSet(0, 1, 2), false, true},
		{"leader unknown", controller.Partition{Replicas: three, Leader: -1, LeaderTerm: 5, ISR: three}, liveSet(0, 1, 2), false, true},
		{"leader not live", controller.Partition{Replicas: three, Leader: 2, LeaderTerm: 5, ISR: three}, liveSet(0, 1), true, true},
	} {
		if got := underReplicated(tc.cp, tc.live); got != tc.underReplicated {
			t.Errorf("%s: under-replicated %v, want %v", tc.name, got, tc.underReplicated)
		}
		if got := offline(tc.cp, tc.live); got != tc.offline {
			t.Errorf("%s: offline %v, want %v", tc.name, got, tc.offline)
		}
	}
}
