package raft

import (
	"errors"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Mux's collectors, shared by its groups.
//
// Cardinality: series labelled by group exist only while the group runs on
// this node and are one per group, never per group × something. They are
// read from the groups at scrape time (stateCollector), so a group keeps
// no series of its own: a stored series costs about a kilobyte, which
// thousands of groups feel. The commit latency histogram would be ~12 series per
// group, so it is labelled by Config.Class ("controller", "partition")
// instead; a slow partition is found from its applied index and leader
// changes, and the histogram says whether commits are slow at all.
type metrics struct {
	reg           prometheus.Registerer
	commitLatency *prometheus.HistogramVec // class
	connAccepted  prometheus.Counter
	connRejected  *prometheus.CounterVec // reason
	conns         *prometheus.CounterVec // result, reason
	state         *stateCollector
}

func newMetrics(reg prometheus.Registerer, m *Mux) (*metrics, error) {
	conns := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_raft_mux_connections_total",
		Help: "Inbound Raft connections on the shared listener, by result (accepted, rejected) and rejection reason.",
	}, []string{"result", "reason"})
	met := &metrics{
		reg: reg,
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_raft_commit_latency_seconds",
			Help:    "Time from Apply on the leader to the entry being committed and applied there, by group class.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 13), // 0.5 ms … 2 s
		}, []string{"class"}),
		connAccepted: conns.WithLabelValues("accepted", ""),
		connRejected: conns.MustCurryWith(prometheus.Labels{"result": "rejected"}),
		conns:        conns,
		state:        newStateCollector(m),
	}
	if reg == nil {
		return met, nil
	}
	for i, c := range []prometheus.Collector{met.commitLatency, conns, met.state} {
		if err := reg.Register(c); err != nil {
			for _, done := range []prometheus.Collector{met.commitLatency, conns}[:i] {
				reg.Unregister(done)
			}
			return nil, errors.Join(errors.New("raft: registering metrics"), err)
		}
	}
	return met, nil
}

func (met *metrics) observeCommit(class string, d time.Duration) {
	met.commitLatency.WithLabelValues(class).Observe(d.Seconds())
}

func (met *metrics) unregister() {
	if met.reg == nil {
		return
	}
	met.reg.Unregister(met.commitLatency)
	met.reg.Unregister(met.conns)
	met.reg.Unregister(met.state)
}

// stateCollector reads each running group's applied index, commit index and
// role at scrape time rather than updating gauges on every Apply: the
// numbers are atomics inside hashicorp/raft, and a group that stops simply
// stops being listed.
type stateCollector struct {
	mux                     *Mux
	applied, commit, leader *prometheus.Desc
	last                    *prometheus.Desc
	leaderChanges           *prometheus.Desc
	groups                  *prometheus.Desc
}

func newStateCollector(m *Mux) *stateCollector {
	return &stateCollector{
		mux: m,
		applied: prometheus.NewDesc("weir_raft_applied_index",
			"Last Raft index applied to the group's state machine on this node.", []string{"group"}, nil),
		commit: prometheus.NewDesc("weir_raft_commit_index",
			"Last Raft index this node knows to be committed in the group.", []string{"group"}, nil),
		last: prometheus.NewDesc("weir_raft_last_index",
			"Last Raft index in the group's log (or snapshot) on this node; above the commit index by what this node holds uncommitted.", []string{"group"}, nil),
		leader: prometheus.NewDesc("weir_raft_is_leader",
			"1 if this node leads the group.", []string{"group"}, nil),
		leaderChanges: prometheus.NewDesc("weir_raft_leader_changes_total",
			"Leaders observed by this node's member of the group (each election this node learns of).", []string{"group"}, nil),
		groups: prometheus.NewDesc("weir_raft_groups",
			"Raft groups running on this node, by role (leader, follower, candidate, other).", []string{"role"}, nil),
	}
}

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.applied
	ch <- s.commit
	ch <- s.last
	ch <- s.leader
	ch <- s.leaderChanges
	ch <- s.groups
}

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	a, c, l := s.applied, s.commit, s.leader
	s.mux.mu.Lock()
	groups := make([]*Group, 0, len(s.mux.groups))
	for _, g := range s.mux.groups {
		groups = append(groups, g)
	}
	s.mux.mu.Unlock()
	roles := map[string]float64{"leader": 0, "follower": 0, "candidate": 0, "other": 0}
	for _, g := range groups {
		leader := 0.0
		switch g.raft.State() {
		case hraft.Leader:
			leader = 1
			roles["leader"]++
		case hraft.Follower:
			roles["follower"]++
		case hraft.Candidate:
			roles["candidate"]++
		default:
			roles["other"]++
		}
		ch <- prometheus.MustNewConstMetric(a, prometheus.GaugeValue, float64(g.raft.AppliedIndex()), g.name)
		ch <- prometheus.MustNewConstMetric(c, prometheus.GaugeValue, float64(g.raft.CommitIndex()), g.name)
		ch <- prometheus.MustNewConstMetric(s.last, prometheus.GaugeValue, float64(g.raft.LastIndex()), g.name)
		ch <- prometheus.MustNewConstMetric(l, prometheus.GaugeValue, leader, g.name)
		ch <- prometheus.MustNewConstMetric(s.leaderChanges, prometheus.CounterValue, float64(g.leaderChanges.Load()), g.name)
	}
	for role, n := range roles {
		ch <- prometheus.MustNewConstMetric(s.groups, prometheus.GaugeValue, n, role)
	}
}
