package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Replication throttles. A replica being caught up (a reassignment's new
// replica, a replica whose data was lost) copies the leader's records in
// chunks (pullRecords, servePartitionRead); those copies can be held to a
// rate so that moving a large partition does not starve produce and fetch
// of the disk and the network, as Kafka's leader.replication.throttled.rate
// and follower.replication.throttled.rate do: the leader waits before it
// serves a chunk, the follower before it asks for the next one. The
// records a follower still gets as Raft entries (at most
// raft_trailing_entries behind the leader's snapshot) are not throttled:
// they are what keeps a replica in sync.

// byteThrottle is a token bucket of bytes; its rate is read at each call
// (a cluster property), and a burst of one second's worth passes at once.
type byteThrottle struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
	// waited is the time callers spent waiting, in nanoseconds.
	waited atomic.Int64
}

// wait takes n bytes at rate bytes per second (0 or less: no limit),
// sleeping while the bucket is in debt; it returns early with ctx's error.
func (t *byteThrottle) wait(ctx context.Context, n int, rate int64) error {
	if rate <= 0 || n <= 0 {
		return nil
	}
	t.mu.Lock()
	now := time.Now()
	if !t.last.IsZero() {
		t.tokens = min(t.tokens+now.Sub(t.last).Seconds()*float64(rate), float64(rate))
	} else {
		t.tokens = float64(rate)
	}
	t.last = now
	t.tokens -= float64(n)
	debt := t.tokens
	t.mu.Unlock()
	if debt >= 0 {
		return nil
	}
	d := time.Duration(-debt / float64(rate) * float64(time.Second))
	t.waited.Add(int64(d))
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// registerThrottleMetrics reports the time catch-up copies waited.
func (rs *Replicas) registerThrottleMetrics(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for dir, t := range map[string]*byteThrottle{"leader": &rs.leaderThrottle, "follower": &rs.followerThrottle} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "weir_replication_throttle_seconds_total",
			Help:        "Time copies of records to replicas being caught up waited for the replication throttles (leader_/follower_replication_throttled_rate), by side.",
			ConstLabels: prometheus.Labels{"side": dir},
		}, func() float64 { return time.Duration(t.waited.Load()).Seconds() })
		if err := reg.Register(c); err != nil {
			rs.logger.Warn("registering replication throttle metrics", "err", err)
		}
	}
}
