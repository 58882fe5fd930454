package broker

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Follower fetching (KIP-392). Consumer fetches of v11+ may be served by
// any replica of a partition: a follower applies only committed entries,
// so its log end is its high watermark and everything it serves is
// committed. Only the leader chooses where a consumer reads: for a
// consumer that names a rack other than the leader's, it answers at once,
// without records, naming an in-sync replica in that rack.

// rackAwareProperty switches the leader's choice of a replica in the
// consumer's rack (Kafka's replica.selector.class).
const rackAwareProperty = "enable_rack_aware_follower_fetching"

// ReplicaPartition returns partition i when this broker holds a replica
// of it that can serve a consumer, and whether it is the leader. The
// leader is checked as LeaderPartition does; a follower checks the
// client's current leader epoch against the Raft term it knows:
// newer is UNKNOWN_LEADER_EPOCH (this follower is behind), older is
// FENCED_LEADER_EPOCH; -1 skips the check.
func (t *Topic) ReplicaPartition(i int32, currentLeaderEpoch int32) (p *Partition, leader bool, err error) {
	p, err = t.LocalPartition(i)
	if err != nil {
		return nil, false, err
	}
	if err := p.failure(); err != nil {
		return nil, false, err
	}
	if p.leaderEpoch.Load() >= 0 {
		if err := p.checkLeaderEpoch(currentLeaderEpoch); err != nil {
			return nil, false, err
		}
		return p, true, nil
	}
	if p.group == nil {
		return nil, false, fmt.Errorf("%w: the replica of %s/%d is not running", kerr.NotLeaderForPartition, t.Name(), i)
	}
	term := int32(p.group.Term())
	switch {
	case currentLeaderEpoch < 0:
	case currentLeaderEpoch > term:
		return nil, false, fmt.Errorf("%w: %s/%d: leader epoch %d is newer than this replica's %d", kerr.UnknownLeaderEpoch, t.Name(), i, currentLeaderEpoch, term)
	case currentLeaderEpoch < term:
		return nil, false, fmt.Errorf("%w: %s/%d: leader epoch %d is older than the current %d", kerr.FencedLeaderEpoch, t.Name(), i, currentLeaderEpoch, term)
	}
	return p, false, nil
}

// followerReadSilence: a follower whose progress report is older than
// this is not offered to consumers. It reports every second; a dead one
// stops being chosen within seconds, long before it leaves the ISR or its
// broker session expires.
const followerReadSilence = 3 * replicaProgressEvery

// preferredReadReplica picks where a consumer in rack should read p from
// offset: an in-sync follower in that rack, live and heard from lately,
// whose log reaches the offset (the one furthest ahead; the lowest id
// among equals), or -1 to serve the fetch here — when the consumer names
// no rack, shares this broker's rack, the property is off, or no such
// replica exists.
func (fe *FetchPath) preferredReadReplica(p *Partition, offset int64, rack string) int32 {
	if rack == "" || rack == fe.node.Rack || !fe.props.Bool(rackAwareProperty) {
		return -1
	}
	now := time.Now()
	lt := &p.tracking
	lt.mu.Lock()
	defer lt.mu.Unlock()
	best, bestEnd := int32(-1), int64(-1)
	for _, id := range lt.reportedISR {
		if id == fe.node.NodeID {
			continue
		}
		f := lt.followers[id]
		if f == nil || f.end < offset || now.Sub(f.prevAt) > followerReadSilence ||
			f.end < bestEnd || (f.end == bestEnd && id > best) {
			continue
		}
		if info, live := fe.liveBroker(id); !live || info.Rack != rack {
			continue
		}
		best, bestEnd = id, f.end
	}
	return best
}

// countServed adds a fetch's partitions that returned records to the
// served-by-role counters.
func (fe *FetchPath) countServed(out []FetchResult) {
	for i := range out {
		r := &out[i]
		if len(r.Records) == 0 {
			continue
		}
		role := &fe.served.leader
		if r.byFollower {
			role = &fe.served.follower
		}
		role.reads.Add(1)
		role.bytes.Add(uint64(len(r.Records)))
	}
}

// registerFetchRoleMetrics exports the served-by-role counters.
func (fe *FetchPath) registerFetchRoleMetrics() {
	if fe.registerer == nil {
		return
	}
	reads := prometheus.NewDesc("weir_fetch_partition_reads_total",
		"Partitions of consumer fetches this broker answered with records, by the role of its replica: leader, or follower (KIP-392 follower fetching).", []string{"role"}, nil)
	bytes := prometheus.NewDesc("weir_fetch_bytes_total",
		"Record bytes this broker returned to consumer fetches, by the role of its replica.", []string{"role"}, nil)
	c := collectorFunc{
		describe: func(ch chan<- *prometheus.Desc) { ch <- reads; ch <- bytes },
		collect: func(ch chan<- prometheus.Metric) {
			for role, s := range map[string]*servedCounters{"leader": &fe.served.leader, "follower": &fe.served.follower} {
				ch <- prometheus.MustNewConstMetric(reads, prometheus.CounterValue, float64(s.reads.Load()), role)
				ch <- prometheus.MustNewConstMetric(bytes, prometheus.CounterValue, float64(s.bytes.Load()), role)
			}
		},
	}
	if err := fe.registerer.Register(c); err != nil {
		fe.logger.Warn("registering fetch role metrics", "err", err)
	}
}

// collectorFunc is a prometheus.Collector made of two functions.
type collectorFunc struct {
	describe func(chan<- *prometheus.Desc)
	collect  func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { c.describe(ch) }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// servedCounters count fetched partitions with records, and their bytes.
type servedCounters struct{ reads, bytes atomic.Uint64 }
