package broker

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/broker/controller"
)

// registerMetrics registers the partition and cluster-config gauges on
// the broker's registerer, if it has one. A failure is logged, not
// returned: a broker serves as well without its metrics.
func (b *Broker) registerMetrics() {
	if b.registerer == nil {
		return
	}
	if err := b.registerer.Register(newStateCollector(b)); err != nil {
		b.logger.Warn("registering broker metrics", "err", err)
	}
}

// stateCollector reports the broker's partitions and the cluster config
// version by reading the broker's state at scrape time. Leadership, the
// ISR and the replica set change on goroutines of their own; reading
// them when Prometheus asks keeps every gauge exact without a single
// update on the paths that change them.
type stateCollector struct {
	b *Broker

	partitions      *prometheus.Desc
	leaders         *prometheus.Desc
	underReplicated *prometheus.Desc
	offline         *prometheus.Desc
	configVersion   *prometheus.Desc
	groups          *prometheus.Desc
	rebalances      *prometheus.Desc
	acksOne         *prometheus.Desc
}

func newStateCollector(b *Broker) *stateCollector {
	return &stateCollector{
		b: b,
		partitions: prometheus.NewDesc("weir_partitions",
			"Partition replicas this broker runs, by role: leader (it serves produce and fetch) or follower.",
			[]string{"role"}, nil),
		leaders: prometheus.NewDesc("weir_partition_leaders",
			"Partitions this broker leads.", nil, nil),
		underReplicated: prometheus.NewDesc("weir_under_replicated_partitions",
			"Partitions this broker leads that have fewer live in-sync replicas than replicas (Kafka's UnderReplicatedPartitions).", nil, nil),
		offline: prometheus.NewDesc("weir_offline_partitions",
			"Partitions of the cluster without a live elected leader, as the controller records them; reported by the broker that leads the controller group, 0 on the others, so the sum over brokers is the cluster's count (Kafka's OfflinePartitionsCount).", nil, nil),
		configVersion: prometheus.NewDesc("weir_cluster_config_version",
			"The cluster config version this broker has applied: the number of batches of cluster property changes.", nil, nil),
		groups: prometheus.NewDesc("weir_groups",
			"Groups this broker coordinates, by type (classic, consumer: KIP-848) and state, as ListGroups names them (Kafka's group-count and consumer-group-count).", []string{"type", "state"}, nil),
		rebalances: prometheus.NewDesc("weir_group_rebalances_total",
			"Rebalances this broker's coordinator started, by group type: a classic group preparing a rebalance, a consumer-protocol group bumping its epoch (Kafka's consumer-group-rebalance-count).", []string{"type"}, nil),
		acksOne: prometheus.NewDesc("weir_produce_acks1_answers_total",
			"Batches produced with acks=1 and answered here, by what answered them: leader_log (the batch was fsynced in the leader's Raft log and its offsets known) or commit (it waited for a majority, as acks=all does).", []string{"from"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.partitions
	ch <- c.leaders
	ch <- c.underReplicated
	ch <- c.offline
	ch <- c.configVersion
	ch <- c.groups
	ch <- c.rebalances
	ch <- c.acksOne
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.partitionStats(time.Now())
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(c.partitions, s.leaders, "leader")
	gauge(c.partitions, s.followers, "follower")
	gauge(c.leaders, s.leaders)
	gauge(c.underReplicated, s.underReplicated)
	gauge(c.offline, s.offline)
	gauge(c.configVersion, c.b.ClusterConfigVersion())
	ch <- prometheus.MustNewConstMetric(c.acksOne, prometheus.CounterValue, float64(c.b.acksOne.leaderLog.Load()), "leader_log")
	ch <- prometheus.MustNewConstMetric(c.acksOne, prometheus.CounterValue, float64(c.b.acksOne.commit.Load()), "commit")
	if coord := c.b.Groups(); coord != nil {
		for k, n := range coord.GroupCounts() {
			gauge(c.groups, int64(n), k.Type, k.State)
		}
		classic, consumer := coord.Rebalances()
		ch <- prometheus.MustNewConstMetric(c.rebalances, prometheus.CounterValue, float64(classic), "classic")
		ch <- prometheus.MustNewConstMetric(c.rebalances, prometheus.CounterValue, float64(consumer), "consumer")
	}
}

// partitionStats counts what the partition gauges report.
type partitionStats struct {
	leaders, followers, underReplicated, offline int64
}

// partitionStats reads the local replicas and one controller view at
// now.
func (b *Broker) partitionStats(now time.Time) partitionStats {
	v := b.ctrl.state.View()
	live := func(id int32) bool { return v.Live(id, now) }
	var s partitionStats
	for _, p := range b.localReplicas() {
		if p.deleted.Load() {
			continue // its topic is going away
		}
		if !p.IsLeader() {
			s.followers++
			continue
		}
		s.leaders++
		if cp, ok := v.Partition(p.topic.ID(), p.Index); ok && underReplicated(cp, live) {
			s.underReplicated++
		}
	}
	// Every broker holds the same view; only the controller's leader
	// reports from it, so that summing over brokers does not count each
	// offline partition once per broker.
	if b.ControllerID() == b.node.NodeID {
		for _, t := range v.Topics() {
			for _, cp := range t.Partitions {
				if offline(cp, live) {
					s.offline++
				}
			}
		}
	}
	return s
}

// underReplicated reports whether a partition has fewer in-sync replicas
// than replicas, counting the in-sync replicas as Metadata shows them
// (PartitionInfos): live, and in the ISR its leader last reported, or
// every live replica while a new leader has not reported one yet.
func underReplicated(cp controller.Partition, live func(int32) bool) bool {
	inSync := 0
	for _, r := range cp.Replicas {
		if live(r) && (cp.ISR == nil || slices.Contains(cp.ISR, r)) {
			inSync++
		}
	}
	return inSync < len(cp.Replicas)
}

// offline reports whether a partition has no leader that can serve it:
// none elected yet (a leader is recorded only once its group elected
// one), or the recorded one is not live.
func offline(cp controller.Partition, live func(int32) bool) bool {
	return cp.LeaderTerm == 0 || cp.Leader < 0 || !live(cp.Leader)
}
