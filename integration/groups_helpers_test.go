package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Helpers for the kgo consumer-group tests (groups_*_test.go): a kgo group
// member with a bounded poll loop and a record of what the group gave it, and
// kadm look-ups of a group's description, assignment and committed offsets.

type memberCfg struct {
	balancer   kgo.GroupBalancer // default cooperative-sticky
	instanceID string
	session    time.Duration // default 6 s
	// block: BlockRebalanceOnPoll, so that a revoke never runs while polled
	// records are being processed.
	block bool
	// commitOnRevoke: CommitUncommittedOffsets in OnPartitionsRevoked.
	commitOnRevoke bool
	// commitEachPoll: CommitUncommittedOffsets after each poll that
	// returned records.
	commitEachPoll bool
	// autoCommit keeps kgo's autocommit (off unless set).
	autoCommit bool
	// onRecord is called from the poll loop for every record.
	onRecord func(m *grpMember, r *kgo.Record)
}

type grpMember struct {
	t     testing.TB
	name  string
	group string
	topic string
	cfg   memberCfg
	cl    *kgo.Client

	mu      sync.Mutex
	owned   map[int32]bool
	events  int // assigned + revoked + lost callbacks that changed something
	lost    int
	recs    []*kgo.Record
	pollErr []error

	closing   atomic.Bool
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

func startMember(t testing.TB, b *Broker, name, group, topic string, cfg memberCfg) *grpMember {
	t.Helper()
	m := &grpMember{t: t, name: name, group: group, topic: topic, cfg: cfg, owned: map[int32]bool{}, done: make(chan struct{})}
	bal := cfg.balancer
	if bal == nil {
		bal = kgo.CooperativeStickyBalancer()
	}
	session := cfg.session
	if session == 0 {
		session = 6 * time.Second
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(b.KafkaAddr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(bal),
		kgo.SessionTimeout(session),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryTimeout(10 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[topic] {
				m.owned[p] = true
			}
			if len(a[topic]) > 0 {
				m.events++
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, r map[string][]int32) {
			if cfg.commitOnRevoke {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := cl.CommitUncommittedOffsets(ctx)
				cancel()
				if err != nil && !m.closing.Load() {
					t.Errorf("%s: committing in OnPartitionsRevoked(%v): %v", name, r, err)
				}
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range r[topic] {
				delete(m.owned, p)
			}
			if len(r[topic]) > 0 && !m.closing.Load() {
				m.events++
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range l[topic] {
				delete(m.owned, p)
			}
			if len(l[topic]) > 0 {
				m.events++
				m.lost++
			}
		}),
	}
	if lvl := os.Getenv("WEIR_TEST_KGO_LOG"); lvl != "" {
		// Debugging aid: kgo's own log of the group protocol.
		level := kgo.LogLevelInfo
		if lvl == "debug" {
			level = kgo.LogLevelDebug
		}
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, func() string { return name + " " })))
	}
	if !cfg.autoCommit {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	if cfg.block {
		opts = append(opts, kgo.BlockRebalanceOnPoll())
	}
	if cfg.instanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("%s: kgo.NewClient: %v", name, err)
	}
	m.cl = cl
	m.ctx, m.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { m.stop() })
	go m.loop()
	return m
}

func (m *grpMember) loop() {
	defer close(m.done)
	for {
		pctx, cancel := context.WithTimeout(m.ctx, 300*time.Millisecond)
		fs := m.cl.PollRecords(pctx, 2000)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				return
			}
			m.mu.Lock()
			if len(m.pollErr) < 10 {
				m.pollErr = append(m.pollErr, fmt.Errorf("%s/%d: %w", topic, p, err))
			}
			m.mu.Unlock()
		})
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if m.cfg.onRecord != nil {
				m.cfg.onRecord(m, r)
			}
			m.mu.Lock()
			m.recs = append(m.recs, r)
			m.mu.Unlock()
		})
		if n > 0 && m.cfg.commitEachPoll {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := m.cl.CommitUncommittedOffsets(cctx); err != nil {
				m.t.Errorf("%s: committing after a poll: %v", m.name, err)
			}
			ccancel()
		}
		if m.cfg.block {
			m.cl.AllowRebalance()
		}
		if m.ctx.Err() != nil || errors.Is(m.cl.Context().Err(), context.Canceled) {
			return
		}
	}
}

// stopPolling ends the poll loop (bounded) without leaving the group.
func (m *grpMember) stopPolling() {
	m.cancel()
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		m.t.Errorf("%s: poll loop did not stop within 15s", m.name)
	}
}

// commitNow commits everything polled and fails on an error.
func (m *grpMember) commitNow() {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		m.t.Fatalf("%s: CommitUncommittedOffsets: %v", m.name, err)
	}
}

// stop stops polling and closes the client (a dynamic member leaves the
// group; a static one does not), bounded.
func (m *grpMember) stop() {
	m.closeOnce.Do(func() {
		m.stopPolling()
		m.closing.Store(true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.cl.CloseAllowingRebalance()
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			m.t.Errorf("%s: kgo Close did not return within 20s", m.name)
		}
	})
}

func (m *grpMember) ownedList() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.owned))
}

func (m *grpMember) eventCount() (events, lost int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events, m.lost
}

func (m *grpMember) records() []*kgo.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*kgo.Record(nil), m.recs...)
}

func (m *grpMember) pollErrors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.pollErr...)
}

// waitRecords waits until the member polled at least n records.
func (m *grpMember) waitRecords(n int, timeout time.Duration) []*kgo.Record {
	m.t.Helper()
	grpWait(m.t, timeout, fmt.Sprintf("%s consumes %d records", m.name, n), func() (bool, string) {
		got := len(m.records())
		return got >= n, fmt.Sprintf("%d records; poll errors %v; owns %v", got, m.pollErrors(), m.ownedList())
	})
	return m.records()
}

// balanced reports whether the members together own exactly partitions
// 0..n-1, with no partition owned twice and each member owning at least
// min(1, ...) partition and at most ceil(n/len) partitions.
func balanced(members []*grpMember, n int32) (bool, string) {
	owner := map[int32]string{}
	desc := ""
	ok := true
	per := (int(n) + len(members) - 1) / len(members)
	for _, m := range members {
		own := m.ownedList()
		desc += fmt.Sprintf("%s=%v ", m.name, own)
		if len(own) == 0 || len(own) > per {
			ok = false
		}
		for _, p := range own {
			if prev, dup := owner[p]; dup {
				return false, fmt.Sprintf("partition %d owned by both %s and %s: %s", p, prev, m.name, desc)
			}
			owner[p] = m.name
		}
	}
	return ok && int32(len(owner)) == n, desc
}

// grpDescribe describes one group through kadm (DescribeGroups at the
// highest version) and fails on a request error.
func grpDescribe(t testing.TB, adm *kadm.Client, group string) kadm.DescribedGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("DescribeGroups %s: %v", group, err)
	}
	d, ok := ds[group]
	if !ok {
		t.Fatalf("DescribeGroups %s: group missing from the response", group)
	}
	return d
}

// describedAssignment returns instance-or-member id -> assigned partitions
// of topic.
func describedAssignment(d kadm.DescribedGroup, topic string) map[string][]int32 {
	out := map[string][]int32{}
	for _, m := range d.Members {
		id := m.MemberID
		if m.InstanceID != nil {
			id = *m.InstanceID
		}
		var ps []int32
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range c.Topics {
				if at.Topic == topic {
					ps = append(ps, at.Partitions...)
				}
			}
		}
		slices.Sort(ps)
		out[id] = ps
	}
	return out
}

// grpOffsets returns the committed offsets of group: topic -> partition ->
// offset, failing on any error.
func grpOffsets(t testing.TB, adm *kadm.Client, group string) map[string]map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	os, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets %s: %v", group, err)
	}
	out := map[string]map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("FetchOffsets %s %s/%d: %v", group, o.Topic, o.Partition, o.Err)
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out
}

// commitExact commits exactly offsets (partition -> offset) of topic as
// member m (its member id and generation) and fails on any error.
func (m *grpMember) commitExact(topic string, offsets map[int32]int64) {
	m.t.Helper()
	eo := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range offsets {
		eo[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cerr error
	m.cl.CommitOffsetsSync(ctx, eo, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 && cerr == nil {
					cerr = fmt.Errorf("%s/%d: error %d", rt.Topic, rp.Partition, rp.ErrorCode)
				}
			}
		}
	})
	if cerr != nil {
		m.t.Fatalf("%s: committing %v: %v", m.name, offsets, cerr)
	}
}
