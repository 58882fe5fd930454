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

// ---------------------------------------------------------------------------
// A kgo group member with a bounded poll loop and a record of what the
// group gave it.

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

// ---------------------------------------------------------------------------
// Tests.

// TestGroupCooperativeRebalanceNoLossNoDuplicates: three cooperative-sticky
// members consume a 6-partition topic while a producer keeps producing; a
// fourth joins, later one leaves. Members process every polled record
// before a rebalance may proceed (BlockRebalanceOnPoll) and commit in
// OnPartitionsRevoked, so a partition's new owner resumes exactly where the
// old one stopped: across members every produced offset is consumed exactly
// once, and the group's committed offsets end at the high watermarks.
func TestGroupCooperativeRebalanceNoLossNoDuplicates(t *testing.T) {
	b := grpBroker(t)
	const (
		topic      = "coop"
		group      = "coop-g"
		partitions = 6
	)
	CreateTopic(t, b, topic, partitions, nil)
	adm := b.Admin(t)

	// Ledger: partition -> offset -> members that consumed it.
	var (
		ledgerMu sync.Mutex
		ledger   = map[int32]map[int64][]string{}
		badVals  []string
	)
	onRecord := func(m *grpMember, r *kgo.Record) {
		ledgerMu.Lock()
		defer ledgerMu.Unlock()
		if ledger[r.Partition] == nil {
			ledger[r.Partition] = map[int64][]string{}
		}
		ledger[r.Partition][r.Offset] = append(ledger[r.Partition][r.Offset], m.name)
		if want := fmt.Sprintf("p%d-%08d", r.Partition, r.Offset); string(r.Value) != want && len(badVals) < 10 {
			badVals = append(badVals, fmt.Sprintf("%d/%d: value %q, want %q", r.Partition, r.Offset, r.Value, want))
		}
	}
	consumedCount := func() map[int32]int {
		ledgerMu.Lock()
		defer ledgerMu.Unlock()
		out := map[int32]int{}
		for p, offs := range ledger {
			out[p] = len(offs)
		}
		return out
	}

	// Producer: rounds of one record per partition, each acknowledged
	// before the next, so offset == round on every partition.
	prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	var (
		rounds  atomic.Int64
		prodErr atomic.Value
	)
	stopProd := make(chan struct{})
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for round := 0; ; round++ {
			select {
			case <-stopProd:
				return
			default:
			}
			recs := make([]*kgo.Record, 0, partitions)
			for p := range int32(partitions) {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "p%d", p), Value: fmt.Appendf(nil, "p%d-%08d", p, round)})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := prod.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				prodErr.Store(fmt.Errorf("round %d: %w", round, err))
				return
			}
			rounds.Store(int64(round + 1))
			time.Sleep(10 * time.Millisecond)
		}
	}()
	stopProducer := func() {
		select {
		case <-stopProd:
		default:
			close(stopProd)
		}
		select {
		case <-prodDone:
		case <-time.After(15 * time.Second):
			t.Fatalf("producer did not stop within 15s")
		}
	}
	defer stopProducer()

	cfg := memberCfg{block: true, commitOnRevoke: true, commitEachPoll: true, onRecord: onRecord}
	var members []*grpMember
	for i := 1; i <= 3; i++ {
		members = append(members, startMember(t, b, fmt.Sprintf("m%d", i), group, topic, cfg))
	}
	grpWait(t, 30*time.Second, "three members share the six partitions", func() (bool, string) { return balanced(members, partitions) })
	t.Logf("3 members: %v", func() string { _, d := balanced(members, partitions); return d }())
	if d := grpDescribe(t, adm, group); d.State != "Stable" || len(d.Members) != 3 || d.Protocol != "cooperative-sticky" {
		t.Errorf("DescribeGroups with three members: state %q, %d members, protocol %q; want Stable, 3, cooperative-sticky", d.State, len(d.Members), d.Protocol)
	}
	time.Sleep(time.Second)

	members = append(members, startMember(t, b, "m4", group, topic, cfg))
	grpWait(t, 30*time.Second, "four members share the six partitions", func() (bool, string) { return balanced(members, partitions) })
	t.Logf("4 members: %v", func() string { _, d := balanced(members, partitions); return d }())
	grpWait(t, 10*time.Second, "DescribeGroups shows four members", func() (bool, string) {
		d := grpDescribe(t, adm, group)
		return d.State == "Stable" && len(d.Members) == 4, fmt.Sprintf("state %q with %d members", d.State, len(d.Members))
	})
	time.Sleep(time.Second)

	// m2 leaves: Close commits (OnPartitionsRevoked) and sends LeaveGroup.
	leaver := members[1]
	leaver.stopPolling()
	leaver.commitNow()
	leaver.stop()
	members = slices.Delete(members, 1, 2)
	grpWait(t, 30*time.Second, "three remaining members share the six partitions", func() (bool, string) { return balanced(members, partitions) })
	t.Logf("after m2 left: %v", func() string { _, d := balanced(members, partitions); return d }())
	grpWait(t, 10*time.Second, "DescribeGroups shows three members", func() (bool, string) {
		d := grpDescribe(t, adm, group)
		return d.State == "Stable" && len(d.Members) == 3, fmt.Sprintf("state %q with %d members", d.State, len(d.Members))
	})
	time.Sleep(time.Second)

	stopProducer()
	if err, _ := prodErr.Load().(error); err != nil {
		t.Fatalf("producer: %v", err)
	}
	n := rounds.Load()
	hw := endOffsets(t, adm, topic)
	for p := range int32(partitions) {
		if hw[p] != n {
			t.Fatalf("partition %d high watermark %d after %d acknowledged rounds", p, hw[p], n)
		}
	}
	t.Logf("produced %d records per partition", n)
	grpWait(t, 30*time.Second, "every produced record consumed", func() (bool, string) {
		c := consumedCount()
		for p := range int32(partitions) {
			if int64(c[p]) < n {
				return false, fmt.Sprintf("distinct offsets consumed per partition %v of %d", c, n)
			}
		}
		return true, ""
	})
	// Stop the rest: each commits and leaves.
	for _, m := range members {
		m.stopPolling()
		m.commitNow()
	}
	for _, m := range members {
		m.stop()
	}

	ledgerMu.Lock()
	defer ledgerMu.Unlock()
	problems := 0
	report := func(format string, args ...any) {
		problems++
		if problems <= 20 {
			t.Errorf(format, args...)
		}
	}
	for p := range int32(partitions) {
		for off, who := range ledger[p] {
			if off < 0 || off >= n {
				report("partition %d: consumed offset %d outside [0,%d)", p, off, n)
			}
			if len(who) > 1 {
				report("partition %d offset %d consumed %d times, by %v (a committed offset was not where the next owner resumed)", p, off, len(who), who)
			}
		}
		for off := int64(0); off < n; off++ {
			if _, ok := ledger[p][off]; !ok {
				report("partition %d offset %d never consumed", p, off)
			}
		}
	}
	for _, v := range badVals {
		report("%s", v)
	}
	// The handoff path was exercised: partitions changed owner mid-stream
	// (m4 took some, m2's went elsewhere) with records on both sides.
	moved := 0
	for p := range int32(partitions) {
		who := map[string]bool{}
		for _, ms := range ledger[p] {
			for _, m := range ms {
				who[m] = true
			}
		}
		if len(who) >= 2 {
			moved++
		}
	}
	if moved < 2 {
		t.Errorf("only %d partitions were consumed by more than one member; the test did not exercise handoffs", moved)
	}
	if problems > 20 {
		t.Errorf("... %d problems in total", problems)
	}
	for _, m := range append(members, leaver) {
		if _, lost := m.eventCount(); lost > 0 {
			t.Errorf("%s lost its partitions %d times (session expiry or fencing in a healthy group)", m.name, lost)
		}
		if errs := m.pollErrors(); len(errs) > 0 {
			t.Errorf("%s poll errors: %v", m.name, errs)
		}
	}
	off := grpOffsets(t, adm, group)
	for p := range int32(partitions) {
		if off[topic][p] != n {
			t.Errorf("committed offset of partition %d is %d, want %d (the high watermark)", p, off[topic][p], n)
		}
	}
	if d := grpDescribe(t, adm, group); d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("after every member left: state %q with %d members, want Empty", d.State, len(d.Members))
	}
}

// TestGroupSessionTimeoutEviction: a raw member that stops heartbeating
// (without LeaveGroup) is removed after its session timeout and the group
// rebalances: the remaining kgo member gets every partition. While it
// heartbeats, it stays, even past its session timeout.
func TestGroupSessionTimeoutEviction(t *testing.T) {
	b := grpBroker(t)
	const (
		topic      = "evict"
		group      = "evict-g"
		partitions = 6
	)
	CreateTopic(t, b, topic, partitions, nil)
	adm := b.Admin(t)
	waitCoordinator(t, b, group)

	k := startMember(t, b, "kgo", group, topic, memberCfg{balancer: kgo.RangeBalancer()})
	grpWait(t, 20*time.Second, "the kgo member owns every partition", func() (bool, string) {
		return len(k.ownedList()) == partitions, fmt.Sprintf("owns %v", k.ownedList())
	})
	kid, _ := k.cl.GroupMetadata()

	raw := newRawMember(t, b, group, topic)
	raw.sessionMs = 2000
	raw.rebalanceMs = 5000
	raw.join() // completes once kgo rejoins
	if raw.leader != kid || raw.leader == raw.id {
		t.Fatalf("after the raw member joined: leader %q, want the kgo member %q", raw.leader, kid)
	}
	got := decodeAssignment(t, raw.sync(nil))
	if len(got[topic]) != partitions/2 {
		t.Fatalf("raw member's range assignment %v, want %d partitions of %s", got, partitions/2, topic)
	}
	grpWait(t, 20*time.Second, "the kgo member owns the other half", func() (bool, string) {
		own := k.ownedList()
		if len(own) != partitions/2 {
			return false, fmt.Sprintf("kgo owns %v, raw %v", own, got[topic])
		}
		for _, p := range own {
			if slices.Contains(got[topic], p) {
				return false, fmt.Sprintf("kgo owns %v, overlapping raw %v", own, got[topic])
			}
		}
		return true, ""
	})

	// Heartbeating keeps the raw member for longer than its session timeout.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		if ec := raw.heartbeat(); ec != errNone {
			t.Fatalf("heartbeat of the raw member: error %d", ec)
		}
		time.Sleep(400 * time.Millisecond)
	}
	if ec := raw.heartbeat(); ec != errNone {
		t.Fatalf("heartbeat of the raw member: error %d", ec)
	}
	lastHB := time.Now()
	if d := grpDescribe(t, adm, group); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("while both heartbeat: state %q with %d members, want Stable with 2", d.State, len(d.Members))
	}

	// The raw member goes silent (its connection stays open).
	var evictedAfter time.Duration
	grpWait(t, 15*time.Second, "the silent member is evicted", func() (bool, string) {
		d := grpDescribe(t, adm, group)
		if len(d.Members) == 1 && d.Members[0].MemberID == kid && d.State == "Stable" {
			if evictedAfter == 0 {
				evictedAfter = time.Since(lastHB)
			}
			if len(k.ownedList()) == partitions {
				return true, ""
			}
		}
		return false, fmt.Sprintf("state %q, members %d, kgo owns %v, %v since the last heartbeat", d.State, len(d.Members), k.ownedList(), time.Since(lastHB))
	})
	t.Logf("silent member evicted %v after its last heartbeat", evictedAfter)
	if evictedAfter < 1700*time.Millisecond {
		t.Errorf("silent member evicted %v after its last heartbeat, before its 2 s session timeout", evictedAfter)
	}
	if ec := raw.heartbeat(); ec != errUnknownMemberID {
		t.Errorf("heartbeat of the evicted member: error %d, want UNKNOWN_MEMBER_ID (25)", ec)
	}
	if _, lost := k.eventCount(); lost > 0 {
		t.Errorf("the kgo member lost its partitions %d times", lost)
	}
}

// TestGroupOffsetsSurviveRestart: offsets committed by a group member and
// by a simple (member-less) commit survive a graceful restart and a
// SIGKILL; a new member of the group resumes exactly from them.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	b := grpBroker(t)
	const (
		topic        = "grestart"
		group        = "grestart-g"
		simple       = "grestart-simple"
		partitions   = 3
		perPartition = 100
	)
	CreateTopic(t, b, topic, partitions, nil)
	prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, prod, seqRecords(topic, partitions, perPartition), 30*time.Second)
	adm := b.Admin(t)

	m := startMember(t, b, "first", group, topic, memberCfg{})
	m.waitRecords(partitions*perPartition, 30*time.Second)
	commits := map[int32]int64{0: 30, 1: 45, 2: 100}
	m.commitExact(topic, commits)
	m.stop()

	ctx := ctxTimeout(t, requestTimeout)
	so := kadm.Offsets{}
	so.Add(kadm.Offset{Topic: topic, Partition: 0, At: 7, LeaderEpoch: -1, Metadata: "m0"})
	so.Add(kadm.Offset{Topic: topic, Partition: 1, At: 8, LeaderEpoch: -1, Metadata: "m1"})
	if err := adm.CommitAllOffsets(ctx, simple, so); err != nil {
		t.Fatalf("simple commit to %s: %v", simple, err)
	}
	want := map[string]map[int32]int64{topic: commits}
	wantSimple := map[string]map[int32]int64{topic: {0: 7, 1: 8}}
	check := func(when string) {
		t.Helper()
		if got := grpOffsets(t, adm, group); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %s offsets %v, want %v", when, group, got, want)
		}
		if got := grpOffsets(t, adm, simple); fmt.Sprint(got) != fmt.Sprint(wantSimple) {
			t.Errorf("%s: %s offsets %v, want %v", when, simple, got, wantSimple)
		}
		ctx := ctxTimeout(t, requestTimeout)
		os, err := adm.FetchOffsets(ctx, simple)
		if err != nil {
			t.Fatalf("%s: FetchOffsets %s: %v", when, simple, err)
		}
		for p, md := range map[int32]string{0: "m0", 1: "m1"} {
			if o, ok := os.Lookup(topic, p); !ok || o.Metadata != md {
				t.Errorf("%s: %s partition %d metadata %q (present %v), want %q", when, simple, p, o.Metadata, ok, md)
			}
		}
	}
	check("before the restart")

	b.Restart(t)
	adm = b.Admin(t)
	check("after a graceful restart")
	if d := grpDescribe(t, adm, group); d.Err != nil || d.State != "Empty" || d.ProtocolType != "consumer" {
		t.Errorf("after the restart DescribeGroups %s: err %v state %q protocol type %q, want Empty consumer", group, d.Err, d.State, d.ProtocolType)
	}
	ctx = ctxTimeout(t, requestTimeout)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	for _, g := range []string{group, simple} {
		if _, ok := listed[g]; !ok {
			t.Errorf("after the restart ListGroups does not list %s: %v", g, listed.Groups())
		}
	}

	// A new member resumes from the committed offsets.
	m2 := startMember(t, b, "second", group, topic, memberCfg{})
	wantN := (perPartition - 30) + (perPartition - 45)
	recs := m2.waitRecords(wantN, 30*time.Second)
	time.Sleep(700 * time.Millisecond)
	recs = m2.records()
	if len(recs) != wantN {
		t.Errorf("resumed member consumed %d records, want %d", len(recs), wantN)
	}
	first := map[int32]int64{}
	for _, r := range recs {
		if f, ok := first[r.Partition]; !ok || r.Offset < f {
			first[r.Partition] = r.Offset
		}
		if r.Offset < commits[r.Partition] {
			t.Errorf("resumed member read partition %d offset %d, below the committed %d", r.Partition, r.Offset, commits[r.Partition])
			break
		}
	}
	if first[0] != 30 || first[1] != 45 {
		t.Errorf("resumed member started at %v, want partition 0 at 30 and 1 at 45", first)
	}
	if _, ok := first[2]; ok {
		t.Errorf("resumed member read partition 2, whose committed offset is the end")
	}
	m2.stopPolling()
	m2.commitNow()
	m2.stop()
	want = map[string]map[int32]int64{topic: {0: perPartition, 1: perPartition, 2: perPartition}}
	check("after the resumed member committed")

	// Acknowledged commits survive a SIGKILL too.
	b.Kill(t)
	b.Start(t)
	adm = b.Admin(t)
	check("after SIGKILL and start")
}

// TestGroupIndependentGroups: two groups read the same topic
// independently; a commit in one moves only that group's offsets.
func TestGroupIndependentGroups(t *testing.T) {
	b := grpBroker(t)
	const (
		topic        = "indep"
		partitions   = 3
		perPartition = 50
	)
	CreateTopic(t, b, topic, partitions, nil)
	prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, prod, seqRecords(topic, partitions, perPartition), 30*time.Second)
	adm := b.Admin(t)

	a := startMember(t, b, "a", "indep-a", topic, memberCfg{})
	c := startMember(t, b, "b", "indep-b", topic, memberCfg{})
	a.waitRecords(partitions*perPartition, 30*time.Second)
	c.waitRecords(partitions*perPartition, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	verifySeq(t, a.records(), partitions, perPartition, false)
	verifySeq(t, c.records(), partitions, perPartition, false)

	a.commitNow()
	if got := grpOffsets(t, adm, "indep-a"); fmt.Sprint(got[topic]) != fmt.Sprint(map[int32]int64{0: 50, 1: 50, 2: 50}) {
		t.Errorf("indep-a offsets %v after committing everything, want 50 each", got)
	}
	if got := grpOffsets(t, adm, "indep-b"); len(got) != 0 {
		t.Errorf("indep-b offsets %v after only indep-a committed, want none", got)
	}
	c.commitExact(topic, map[int32]int64{0: 10, 1: 10, 2: 10})
	a.stop()
	c.stop()
	if got := grpOffsets(t, adm, "indep-a"); fmt.Sprint(got[topic]) != fmt.Sprint(map[int32]int64{0: 50, 1: 50, 2: 50}) {
		t.Errorf("indep-a offsets %v after indep-b committed, want 50 each", got)
	}
	if got := grpOffsets(t, adm, "indep-b"); fmt.Sprint(got[topic]) != fmt.Sprint(map[int32]int64{0: 10, 1: 10, 2: 10}) {
		t.Errorf("indep-b offsets %v, want 10 each", got)
	}

	// New members resume each from their own group's offsets.
	c2 := startMember(t, b, "b2", "indep-b", topic, memberCfg{})
	a2 := startMember(t, b, "a2", "indep-a", topic, memberCfg{})
	c2.waitRecords(partitions*(perPartition-10), 30*time.Second)
	grpWait(t, 20*time.Second, "a2 owns every partition", func() (bool, string) {
		return len(a2.ownedList()) == partitions, fmt.Sprintf("owns %v", a2.ownedList())
	})
	time.Sleep(time.Second)
	if n := len(c2.records()); n != partitions*(perPartition-10) {
		t.Errorf("indep-b resumed member consumed %d records, want %d", n, partitions*(perPartition-10))
	}
	for _, r := range c2.records() {
		if r.Offset < 10 {
			t.Errorf("indep-b resumed member read partition %d offset %d, below its committed 10", r.Partition, r.Offset)
			break
		}
	}
	if n := len(a2.records()); n != 0 {
		t.Errorf("indep-a resumed member consumed %d records, want 0 (everything committed)", n)
	}
}

// TestGroupStaticMemberRejoin: a static member (group.instance.id) that
// closes without LeaveGroup and rejoins within its session timeout gets its
// old assignment at the same generation, and the group does not rebalance.
//
// Run with kgo's cooperative-sticky balancer (whose subscription metadata
// carries the owned partitions and generation, so a restarted member's
// metadata differs from what it sent before) and with range (identical
// metadata).
func TestGroupStaticMemberRejoin(t *testing.T) {
	b := grpBroker(t)
	t.Run("cooperative-sticky", func(t *testing.T) {
		testStaticRejoin(t, b, "static-coop", func() kgo.GroupBalancer { return kgo.CooperativeStickyBalancer() })
	})
	t.Run("range", func(t *testing.T) {
		testStaticRejoin(t, b, "static-range", func() kgo.GroupBalancer { return kgo.RangeBalancer() })
	})
}

func testStaticRejoin(t *testing.T, b *Broker, topic string, bal func() kgo.GroupBalancer) {
	group := topic + "-g"
	const partitions = 4
	CreateTopic(t, b, topic, partitions, nil)
	adm := b.Admin(t)

	dyn := startMember(t, b, "dynamic", group, topic, memberCfg{balancer: bal()})
	grpWait(t, 20*time.Second, "the dynamic member owns every partition", func() (bool, string) {
		return len(dyn.ownedList()) == partitions, fmt.Sprintf("owns %v", dyn.ownedList())
	})
	cfgStatic := memberCfg{instanceID: "static-a", session: 10 * time.Second, balancer: bal()}
	st := startMember(t, b, "static", group, topic, cfgStatic)
	grpWait(t, 30*time.Second, "the members share the partitions", func() (bool, string) {
		return balanced([]*grpMember{dyn, st}, partitions)
	})
	// Settled: no further generation for a while.
	var oldID string
	var gen int32
	grpWait(t, 10*time.Second, "the group settles", func() (bool, string) {
		id1, g1 := st.cl.GroupMetadata()
		_, g2 := dyn.cl.GroupMetadata()
		d := grpDescribe(t, adm, group)
		time.Sleep(time.Second)
		id1b, g1b := st.cl.GroupMetadata()
		ok := g1 == g2 && g1 == g1b && id1 == id1b && d.State == "Stable" && len(d.Members) == 2
		oldID, gen = id1, g1
		return ok, fmt.Sprintf("generations %d/%d/%d, state %q, %d members", g1, g2, g1b, d.State, len(d.Members))
	})
	oldOwned := st.ownedList()
	dynOwned := dyn.ownedList()
	dynEvents, _ := dyn.eventCount()
	before := describedAssignment(grpDescribe(t, adm, group), topic)
	if !slices.Equal(before["static-a"], oldOwned) {
		t.Fatalf("DescribeGroups assigns static-a %v, the member owns %v", before["static-a"], oldOwned)
	}

	// Close: kgo sends no LeaveGroup for a static member.
	st.stop()
	d := grpDescribe(t, adm, group)
	ids := []string{}
	for _, m := range d.Members {
		ids = append(ids, m.MemberID)
	}
	if len(d.Members) != 2 || !slices.Contains(ids, oldID) {
		t.Fatalf("after the static member closed: %d members %v, want 2 including %s (no LeaveGroup for static members)", len(d.Members), ids, oldID)
	}

	st2 := startMember(t, b, "static-again", group, topic, cfgStatic)
	grpWait(t, 20*time.Second, "the restarted static member gets partitions", func() (bool, string) {
		return len(st2.ownedList()) > 0, fmt.Sprintf("owns %v", st2.ownedList())
	})
	newID, newGen := st2.cl.GroupMetadata()
	if !slices.Equal(st2.ownedList(), oldOwned) {
		t.Errorf("restarted static member owns %v, want its old assignment %v", st2.ownedList(), oldOwned)
	}
	if newGen != gen {
		t.Errorf("restarted static member joined generation %d, want the unchanged %d (no rebalance)", newGen, gen)
	}
	if newID == oldID {
		t.Errorf("restarted static member kept member id %q; the coordinator should hand it a new id and fence the old one", newID)
	}

	// Nothing moves for a while (several heartbeat intervals).
	time.Sleep(2 * time.Second)
	if ev, _ := dyn.eventCount(); ev != dynEvents {
		t.Errorf("the dynamic member saw %d assignment changes during the static rejoin, want none", ev-dynEvents)
	}
	if !slices.Equal(dyn.ownedList(), dynOwned) {
		t.Errorf("the dynamic member owns %v after the static rejoin, want unchanged %v", dyn.ownedList(), dynOwned)
	}
	if _, g := dyn.cl.GroupMetadata(); g != gen {
		t.Errorf("the dynamic member is at generation %d, want the unchanged %d", g, gen)
	}
	if _, g := st2.cl.GroupMetadata(); g != gen {
		t.Errorf("the restarted static member is at generation %d, want the unchanged %d", g, gen)
	}
	d = grpDescribe(t, adm, group)
	ids = ids[:0]
	for _, m := range d.Members {
		ids = append(ids, m.MemberID)
	}
	if d.State != "Stable" || len(d.Members) != 2 || slices.Contains(ids, oldID) || !slices.Contains(ids, newID) {
		t.Errorf("after the static rejoin: state %q members %v, want Stable with %s replacing %s", d.State, ids, newID, oldID)
	}
	if after := describedAssignment(d, topic); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("DescribeGroups assignment after the static rejoin %v, want unchanged %v", after, before)
	}

	// The replaced member id is fenced.
	rc := dialRaw(t, b.KafkaAddr)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group = group
	hb.Generation = gen
	hb.MemberID = oldID
	hb.InstanceID = kmsg.StringPtr("static-a")
	if ec := rc.Do(hb).(*kmsg.HeartbeatResponse).ErrorCode; ec != errFencedInstanceID {
		t.Errorf("heartbeat with the replaced member id and instance id static-a: error %d, want FENCED_INSTANCE_ID (82)", ec)
	}
}

// TestGroupDeleteOffsetsAndGroups: OffsetDelete refuses topics a non-empty
// consumer group subscribes to (GROUP_SUBSCRIBED_TO_TOPIC) and deletes the
// others; DeleteGroups refuses a non-empty group (NON_EMPTY_GROUP) and an
// unknown one (GROUP_ID_NOT_FOUND); both succeed once the group is empty,
// and the deletions survive a restart.
func TestGroupDeleteOffsetsAndGroups(t *testing.T) {
	b := grpBroker(t)
	const (
		sub   = "del-sub"
		other = "del-other"
		group = "del-g"
	)
	CreateTopic(t, b, sub, 3, nil)
	CreateTopic(t, b, other, 1, nil)
	adm := b.Admin(t)

	m := startMember(t, b, "member", group, sub, memberCfg{})
	grpWait(t, 20*time.Second, "the member owns every partition", func() (bool, string) {
		return len(m.ownedList()) == 3, fmt.Sprintf("owns %v", m.ownedList())
	})
	m.commitExact(sub, map[int32]int64{0: 1, 1: 2, 2: 3})
	m.commitExact(other, map[int32]int64{0: 5})
	want := map[string]map[int32]int64{sub: {0: 1, 1: 2, 2: 3}, other: {0: 5}}
	if got := grpOffsets(t, adm, group); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed offsets %v, want %v", got, want)
	}

	offsetDelete := func(topics map[string][]int32) (int16, map[string]map[int32]int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		for _, topic := range slices.Sorted(maps.Keys(topics)) {
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = topic
			for _, p := range topics[topic] {
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := b.RawRequest(t, req).(*kmsg.OffsetDeleteResponse)
		out := map[string]map[int32]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = map[int32]int16{}
			for _, rp := range rt.Partitions {
				out[rt.Topic][rp.Partition] = rp.ErrorCode
			}
		}
		return resp.ErrorCode, out
	}
	deleteGroups := func(groups ...string) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = groups
		resp := b.RawRequest(t, req).(*kmsg.DeleteGroupsResponse)
		out := map[string]int16{}
		for _, g := range resp.Groups {
			out[g.Group] = g.ErrorCode
		}
		return out
	}

	top, errs := offsetDelete(map[string][]int32{sub: {0, 1, 2}, other: {0}})
	wantErrs := map[string]map[int32]int16{
		sub:   {0: errGroupSubscribedToTopic, 1: errGroupSubscribedToTopic, 2: errGroupSubscribedToTopic},
		other: {0: errNone},
	}
	if top != errNone || fmt.Sprint(errs) != fmt.Sprint(wantErrs) {
		t.Errorf("OffsetDelete on the non-empty group: top-level %d, partitions %v; want 0 and %v", top, errs, wantErrs)
	}
	want = map[string]map[int32]int64{sub: {0: 1, 1: 2, 2: 3}}
	if got := grpOffsets(t, adm, group); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after OffsetDelete on the non-empty group: offsets %v, want %v", got, want)
	}
	if got := deleteGroups(group, "del-never-existed"); fmt.Sprint(got) != fmt.Sprint(map[string]int16{group: errNonEmptyGroup, "del-never-existed": errGroupIDNotFound}) {
		t.Errorf("DeleteGroups [%s del-never-existed]: %v, want NON_EMPTY_GROUP (68) and GROUP_ID_NOT_FOUND (69)", group, got)
	}
	if d := grpDescribe(t, adm, group); d.State != "Stable" || len(d.Members) != 1 {
		t.Errorf("after the refused DeleteGroups: state %q with %d members, want Stable with 1", d.State, len(d.Members))
	}

	m.stop() // LeaveGroup
	grpWait(t, 10*time.Second, "the group is empty", func() (bool, string) {
		d := grpDescribe(t, adm, group)
		return d.State == "Empty" && len(d.Members) == 0, fmt.Sprintf("state %q with %d members", d.State, len(d.Members))
	})
	top, errs = offsetDelete(map[string][]int32{sub: {0, 1}})
	if top != errNone || fmt.Sprint(errs) != fmt.Sprint(map[string]map[int32]int16{sub: {0: 0, 1: 0}}) {
		t.Errorf("OffsetDelete on the empty group: top-level %d, partitions %v; want all 0", top, errs)
	}
	want = map[string]map[int32]int64{sub: {2: 3}}
	if got := grpOffsets(t, adm, group); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after OffsetDelete on the empty group: offsets %v, want %v", got, want)
	}

	// A second group with offsets that stays, to check deletion is by group.
	ctx := ctxTimeout(t, requestTimeout)
	keep := kadm.Offsets{}
	keep.Add(kadm.Offset{Topic: sub, Partition: 0, At: 9, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "del-keep", keep); err != nil {
		t.Fatalf("commit to del-keep: %v", err)
	}

	if got := deleteGroups(group); got[group] != errNone {
		t.Errorf("DeleteGroups of the empty group: %v, want 0", got)
	}
	if got := deleteGroups(group); got[group] != errGroupIDNotFound {
		t.Errorf("DeleteGroups of the deleted group: %v, want GROUP_ID_NOT_FOUND (69)", got)
	}
	checkGone := func(when string) {
		t.Helper()
		if got := grpOffsets(t, adm, group); len(got) != 0 {
			t.Errorf("%s: deleted group has offsets %v", when, got)
		}
		ctx := ctxTimeout(t, requestTimeout)
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatalf("%s: ListGroups: %v", when, err)
		}
		if _, ok := listed[group]; ok {
			t.Errorf("%s: ListGroups still lists the deleted group %s", when, group)
		}
		if _, ok := listed["del-keep"]; !ok {
			t.Errorf("%s: ListGroups does not list del-keep: %v", when, listed.Groups())
		}
		if got := grpOffsets(t, adm, "del-keep"); fmt.Sprint(got) != fmt.Sprint(map[string]map[int32]int64{sub: {0: 9}}) {
			t.Errorf("%s: del-keep offsets %v, want %s/0 at 9", when, got, sub)
		}
	}
	checkGone("after DeleteGroups")

	b.Restart(t)
	adm = b.Admin(t)
	checkGone("after a restart")
	if got := deleteGroups(group); got[group] != errGroupIDNotFound {
		t.Errorf("after a restart DeleteGroups of the deleted group: %v, want GROUP_ID_NOT_FOUND (69)", got)
	}
}
