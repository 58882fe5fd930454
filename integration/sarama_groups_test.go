package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sarama consumer groups: NewConsumerGroup members with each balance
// strategy and static membership, their assignments, consumption and
// commits, and ClusterAdmin's group calls.

// saramaGroupCases are the consumer group runs: each is one group on its own
// 4-partition topic, at a sarama Version (which fixes the protocol versions
// sarama sends; see saramaGroup) with a balance strategy.
//
//   - v2.8 (sarama's default): FindCoordinator v3, JoinGroup v7, SyncGroup
//     v5, Heartbeat v4, LeaveGroup v4, OffsetCommit v8, OffsetFetch v7,
//     ListGroups v3, DescribeGroups v5, DeleteGroups v2, OffsetDelete v0.
//   - v4.3 (sarama.MaxVersion): JoinGroup v8, LeaveGroup v5, OffsetFetch v8
//     (the groups array), ListGroups v5 (types filter), subscription
//     metadata v2; static members (group.instance.id) removed with
//     LeaveGroup v3 by instance id.
//   - v0.11: FindCoordinator v1, JoinGroup v2, SyncGroup v1, Heartbeat v1,
//     LeaveGroup v1, OffsetCommit v3, OffsetFetch v3. Its admin runs at
//     1.1 (ListGroups v1, DescribeGroups v1, DeleteGroups v0): sarama
//     refuses DeleteGroups below 1.1 and OffsetDelete below 2.4 itself.
var saramaGroupCases = []struct {
	name     string
	version  sarama.KafkaVersion
	strategy func() sarama.BalanceStrategy
	static   bool
}{
	{"v2.8-range", sarama.DefaultVersion, sarama.NewBalanceStrategyRange, false},
	{"v2.8-roundrobin", sarama.DefaultVersion, sarama.NewBalanceStrategyRoundRobin, false},
	{"v2.8-cooperative-sticky", sarama.DefaultVersion, sarama.NewBalanceStrategyCooperativeSticky, false},
	{"v4.3-sticky-static", sarama.MaxVersion, sarama.NewBalanceStrategySticky, true},
	{"v0.11-range", sarama.V0_11_0_0, sarama.NewBalanceStrategyRange, false},
}

const (
	saramaGroupPartitions = 4
	saramaGroupWait       = 45 * time.Second // bound on a rebalance settling or a batch being consumed
)

// saramaGroupCollector records every message the members of a group
// consumed, by partition and offset, with the member that consumed it.
type saramaGroupCollector struct {
	mu    sync.Mutex
	topic string
	by    map[int32]map[int64]string // partition -> offset -> member
	n     int
	errs  []string // duplicates, strays, wrong values
}

func (c *saramaGroupCollector) add(member string, m *sarama.ConsumerMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.Topic != c.topic || m.Partition < 0 || m.Partition >= saramaGroupPartitions {
		c.errs = append(c.errs, fmt.Sprintf("%s consumed a message from %s/%d", member, m.Topic, m.Partition))
		return
	}
	if want := saramaGroupValue(m.Partition, m.Offset); string(m.Value) != want {
		c.errs = append(c.errs, fmt.Sprintf("%s consumed %s/%d@%d with value %q, want %q", member, m.Topic, m.Partition, m.Offset, m.Value, want))
	}
	if prev, dup := c.by[m.Partition][m.Offset]; dup {
		c.errs = append(c.errs, fmt.Sprintf("%s/%d@%d consumed twice: by %s, then by %s", m.Topic, m.Partition, m.Offset, prev, member))
		return
	}
	c.by[m.Partition][m.Offset] = member
	c.n++
}

func saramaGroupValue(p int32, off int64) string { return fmt.Sprintf("sarama-group-p%d-o%d", p, off) }

// saramaGroupHandler is a sarama.ConsumerGroupHandler: it marks every
// message and commits (Session.Commit, auto-commit is off) whenever a
// claim has caught up with its high watermark.
type saramaGroupHandler struct {
	name string
	col  *saramaGroupCollector

	mu      sync.Mutex
	running map[int32]bool // partitions whose ConsumeClaim is running
	sess    sarama.ConsumerGroupSession
}

func (h *saramaGroupHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sess = s
	return nil
}

func (h *saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaGroupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	p := claim.Partition()
	h.mu.Lock()
	h.running[p] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.running, p)
		h.mu.Unlock()
	}()
	for m := range claim.Messages() {
		h.col.add(h.name, m)
		s.MarkMessage(m, "")
		if m.Offset+1 >= claim.HighWaterMarkOffset() {
			s.Commit()
		}
	}
	return nil
}

// claims returns the partitions being consumed and the member ID and
// generation of the latest session (a cooperative session lives across
// generations, so they are read from it).
func (h *saramaGroupHandler) claims() ([]int32, string, int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ps []int32
	for p := range h.running {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	if h.sess == nil {
		return ps, "", -1
	}
	return ps, h.sess.MemberID(), h.sess.GenerationID()
}

// saramaGroupMember is one sarama.ConsumerGroup consuming in a loop.
type saramaGroupMember struct {
	name     string
	instance string
	group    sarama.ConsumerGroup
	h        *saramaGroupHandler
	cancel   context.CancelFunc
	done     chan struct{}

	mu   sync.Mutex
	errs []string
}

func startSaramaGroupMember(t *testing.T, b *Broker, v sarama.KafkaVersion, strategy sarama.BalanceStrategy, group, topic, name, instance string, col *saramaGroupCollector) *saramaGroupMember {
	t.Helper()
	cfg := saramaConfig(t, v)
	cfg.ClientID = name
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	cfg.Consumer.Group.Rebalance.Timeout = 30 * time.Second
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.InstanceId = instance
	g, err := sarama.NewConsumerGroup([]string{b.KafkaAddr}, group, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup(%s, version %s): %v", group, v, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaGroupMember{
		name: name, instance: instance, group: g, cancel: cancel, done: make(chan struct{}),
		h: &saramaGroupHandler{name: name, col: col, running: map[int32]bool{}},
	}
	go func() {
		for e := range g.Errors() {
			m.mu.Lock()
			m.errs = append(m.errs, e.Error())
			m.mu.Unlock()
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m.h); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				m.mu.Lock()
				m.errs = append(m.errs, "Consume: "+err.Error())
				m.mu.Unlock()
				select { // don't spin on a persistent error
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}()
	t.Cleanup(func() { m.close(t) })
	return m
}

// close stops the consume loop and closes the group (a dynamic member
// sends LeaveGroup), bounded.
func (m *saramaGroupMember) close(t *testing.T) {
	t.Helper()
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.cancel = nil
	closed := make(chan error, 1)
	go func() { closed <- m.group.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("closing consumer group member %s: %v", m.name, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("closing consumer group member %s did not return within 30s", m.name)
		return
	}
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Errorf("consumer group member %s: consume loop still running 10s after Close", m.name)
	}
}

func (m *saramaGroupMember) errors() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.errs)
}

// awaitSaramaAssignment waits until each member consumes the wanted number
// of partitions, all in the same generation, together all partitions once.
func awaitSaramaAssignment(t *testing.T, what string, sizes []int, ms ...*saramaGroupMember) {
	t.Helper()
	deadline := time.Now().Add(saramaGroupWait)
	start := time.Now()
	for {
		var state []string
		ok := true
		seen := map[int32]int{}
		gens := map[int32]bool{}
		for i, m := range ms {
			ps, id, gen := m.h.claims()
			state = append(state, fmt.Sprintf("%s(gen %d, %s)=%v", m.name, gen, id, ps))
			if len(ps) != sizes[i] {
				ok = false
			}
			gens[gen] = true
			for _, p := range ps {
				seen[p]++
			}
		}
		if ok && len(seen) == saramaGroupPartitions && len(gens) == 1 {
			for _, n := range seen {
				if n != 1 {
					ok = false
				}
			}
			if ok {
				t.Logf("%s: assignment settled in %v: %v", what, time.Since(start).Round(time.Millisecond), state)
				return
			}
		}
		if time.Now().After(deadline) {
			var errs []string
			for _, m := range ms {
				errs = append(errs, m.errors()...)
			}
			t.Fatalf("%s: assignment did not settle within %v (want sizes %v): %v; member errors: %v", what, saramaGroupWait, sizes, state, errs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceSaramaGroupBatch appends perPartition records to every partition
// (value saramaGroupValue(p, offset)) and advances ends.
func produceSaramaGroupBatch(t *testing.T, b *Broker, topic string, ends []int64, perPartition int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range int32(saramaGroupPartitions) {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(saramaGroupValue(p, ends[p]+int64(i)))})
		}
	}
	produceAll(t, cl, recs, 30*time.Second)
	cl.Close()
	for p := range ends {
		ends[p] += int64(perPartition)
	}
}

// awaitSaramaConsumed waits until the collector holds every offset below
// ends (and nothing else), each consumed by a member owning the partition
// at the time, then a second more for duplicates.
func awaitSaramaConsumed(t *testing.T, what string, col *saramaGroupCollector, ends []int64, ms ...*saramaGroupMember) {
	t.Helper()
	var want int
	for _, e := range ends {
		want += int(e)
	}
	deadline := time.Now().Add(saramaGroupWait)
	start := time.Now()
	for {
		col.mu.Lock()
		n, errs := col.n, slices.Clone(col.errs)
		col.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("%s: %d problems; first: %v", what, len(errs), errs[:min(len(errs), 10)])
		}
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			var merrs []string
			for _, m := range ms {
				merrs = append(merrs, m.errors()...)
			}
			t.Fatalf("%s: consumed %d of %d records within %v; member errors: %v", what, n, want, saramaGroupWait, merrs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.errs) > 0 {
		t.Fatalf("%s: %d problems; first: %v", what, len(col.errs), col.errs[:min(len(col.errs), 10)])
	}
	if col.n != want {
		t.Fatalf("%s: consumed %d records, want %d", what, col.n, want)
	}
	for p := range int32(saramaGroupPartitions) {
		for o := range ends[p] {
			if _, ok := col.by[p][o]; !ok {
				t.Fatalf("%s: %s/%d@%d never consumed", what, col.topic, p, o)
			}
		}
	}
	t.Logf("%s: %d records consumed exactly once in %v", what, want, time.Since(start).Round(time.Millisecond))
}

// saramaCommitted fetches the group's committed offsets of the topic's
// partitions with ClusterAdmin.ListConsumerGroupOffsets (-1: none).
func saramaCommitted(t *testing.T, adm sarama.ClusterAdmin, group, topic string) ([]int64, []string) {
	t.Helper()
	parts := []int32{0, 1, 2, 3}
	resp, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		t.Fatalf("ListConsumerGroupOffsets(%s): %v", group, err)
	}
	offs := make([]int64, len(parts))
	metas := make([]string, len(parts))
	for _, p := range parts {
		blk := resp.GetBlock(topic, p)
		if blk == nil {
			t.Fatalf("ListConsumerGroupOffsets(%s): no block for %s/%d", group, topic, p)
		}
		if !errors.Is(blk.Err, sarama.ErrNoError) {
			t.Fatalf("ListConsumerGroupOffsets(%s): %s/%d: %v", group, topic, p, blk.Err)
		}
		offs[p], metas[p] = blk.Offset, blk.Metadata
	}
	return offs, metas
}

// awaitSaramaCommitted waits until the committed offsets are ends: members
// commit from their claim goroutines.
func awaitSaramaCommitted(t *testing.T, adm sarama.ClusterAdmin, group, topic string, ends []int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, _ := saramaCommitted(t, adm, group, topic)
		if slices.Equal(got, ends) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListConsumerGroupOffsets(%s): %v 15s after consuming, want %v", group, got, ends)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkSaramaDescription checks DescribeConsumerGroups for a group whose
// members are ms (empty: the group has no members).
func checkSaramaDescription(t *testing.T, adm sarama.ClusterAdmin, group, topic, protocol string, ms ...*saramaGroupMember) {
	t.Helper()
	ds, err := adm.DescribeConsumerGroups([]string{group})
	if err != nil {
		t.Fatalf("DescribeConsumerGroups(%s): %v", group, err)
	}
	if len(ds) != 1 || ds[0].GroupId != group || !errors.Is(ds[0].Err, sarama.ErrNoError) {
		t.Fatalf("DescribeConsumerGroups(%s): %+v", group, ds)
	}
	d := ds[0]
	if len(ms) == 0 {
		if d.State != "Empty" || len(d.Members) != 0 {
			t.Errorf("DescribeConsumerGroups(%s) without members: state %q, %d members; want Empty, 0", group, d.State, len(d.Members))
		}
		return
	}
	if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != protocol {
		t.Errorf("DescribeConsumerGroups(%s): state %q, protocol type %q, protocol %q; want Stable, consumer, %s", group, d.State, d.ProtocolType, d.Protocol, protocol)
	}
	if len(d.Members) != len(ms) {
		t.Fatalf("DescribeConsumerGroups(%s): %d members, want %d", group, len(d.Members), len(ms))
	}
	for _, m := range ms {
		ps, id, _ := m.h.claims()
		md := d.Members[id]
		if md == nil {
			t.Errorf("DescribeConsumerGroups(%s): no member %s (%s); members: %v", group, id, m.name, slices.Collect(maps.Keys(d.Members)))
			continue
		}
		if md.ClientId != m.name || md.ClientHost == "" {
			t.Errorf("DescribeConsumerGroups(%s) member %s: client id %q host %q, want %q and a host", group, id, md.ClientId, md.ClientHost, m.name)
		}
		if m.instance != "" && (md.GroupInstanceId == nil || *md.GroupInstanceId != m.instance) {
			t.Errorf("DescribeConsumerGroups(%s) member %s: group instance id %v, want %s", group, id, derefStr(md.GroupInstanceId), m.instance)
		}
		meta, err := md.GetMemberMetadata()
		if err != nil || meta == nil || !slices.Equal(meta.Topics, []string{topic}) {
			t.Errorf("DescribeConsumerGroups(%s) member %s: metadata %+v (%v), want a subscription to %s", group, id, meta, err, topic)
		}
		asg, err := md.GetMemberAssignment()
		if err != nil || asg == nil {
			t.Errorf("DescribeConsumerGroups(%s) member %s: assignment %+v (%v)", group, id, asg, err)
			continue
		}
		got := slices.Clone(asg.Topics[topic])
		slices.Sort(got)
		if len(asg.Topics) != 1 || !slices.Equal(got, ps) {
			t.Errorf("DescribeConsumerGroups(%s) member %s (%s): assignment %v, want %s: %v", group, id, m.name, asg.Topics, topic, ps)
		}
	}
}

func saramaListed(t *testing.T, adm sarama.ClusterAdmin, group string) (string, bool) {
	t.Helper()
	groups, err := adm.ListConsumerGroups()
	if err != nil {
		t.Fatalf("ListConsumerGroups: %v", err)
	}
	pt, ok := groups[group]
	return pt, ok
}

// saramaGroup runs one consumer group case: member 1 reads everything;
// member 2 joins and the two split the partitions 2/2 and read a new batch
// exactly once; the admin lists and describes the group, reads its offsets
// and may not delete the group or a subscribed topic's offsets; member 2
// leaves (a static member is removed by instance id) and member 1 takes
// everything and reads another batch; once empty, an OffsetManager rewinds
// partition 0, one partition's offsets are deleted, then the group.
func saramaGroup(t *testing.T, b *Broker, v sarama.KafkaVersion, newStrategy func() sarama.BalanceStrategy, static bool, name string) {
	topic := "sarama-group-" + name
	group := "sarama-group-" + name
	CreateTopic(t, b, topic, saramaGroupPartitions, nil)
	ends := make([]int64, saramaGroupPartitions)
	produceSaramaGroupBatch(t, b, topic, ends, 100)
	col := &saramaGroupCollector{topic: topic, by: map[int32]map[int64]string{}}
	for p := range int32(saramaGroupPartitions) {
		col.by[p] = map[int64]string{}
	}
	protocol := newStrategy().Name()

	// The OffsetManager runs at v; the admin at v too, but at least 1.1:
	// below that sarama itself refuses DeleteGroups (it checks each
	// request's minimum Version before sending). OffsetDelete needs 2.4 in
	// sarama, so with an older admin it is not tried.
	cfg := saramaConfig(t, v)
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	client, err := sarama.NewClient([]string{b.KafkaAddr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewClient (version %s): %v", v, err)
	}
	defer client.Close()
	av := v
	if !av.IsAtLeast(sarama.V1_1_0_0) {
		av = sarama.V1_1_0_0
	}
	offsetDelete := av.IsAtLeast(sarama.V2_4_0_0)
	adm, err := sarama.NewClusterAdmin([]string{b.KafkaAddr}, saramaConfig(t, av))
	if err != nil {
		t.Fatalf("sarama.NewClusterAdmin (version %s): %v", av, err)
	}
	defer adm.Close()
	if av != v {
		t.Logf("admin calls at version %s (OffsetDelete tried: %v)", av, offsetDelete)
	}

	instance := func(i int) string {
		if static {
			return fmt.Sprintf("%s-instance-%d", name, i)
		}
		return ""
	}
	// removeStatic removes a closed static member by instance id (LeaveGroup v3).
	removeStatic := func(m *saramaGroupMember) {
		t.Helper()
		resp, err := adm.RemoveMemberFromConsumerGroup(group, []string{m.instance})
		if err != nil {
			t.Fatalf("RemoveMemberFromConsumerGroup(%s, %s): %v", group, m.instance, err)
		}
		if len(resp.Members) != 1 || derefStr(resp.Members[0].GroupInstanceId) != m.instance || !errors.Is(resp.Members[0].Err, sarama.ErrNoError) {
			var rs []string
			for _, r := range resp.Members {
				rs = append(rs, fmt.Sprintf("{member %q instance %q: %v}", r.MemberId, derefStr(r.GroupInstanceId), r.Err))
			}
			t.Fatalf("RemoveMemberFromConsumerGroup(%s, %s): member responses %v, want one for %s without error", group, m.instance, rs, m.instance)
		}
	}

	// One member reads everything.
	m1 := startSaramaGroupMember(t, b, v, newStrategy(), group, topic, name+"-m1", instance(1), col)
	awaitSaramaConsumed(t, "one member", col, ends, m1)
	awaitSaramaAssignment(t, "one member", []int{4}, m1)
	awaitSaramaCommitted(t, adm, group, topic, ends)
	_, _, gen1 := m1.h.claims()

	if pt, ok := saramaListed(t, adm, group); !ok || pt != "consumer" {
		t.Errorf("ListConsumerGroups: %s listed %v with protocol type %q, want listed with consumer", group, ok, pt)
	}
	checkSaramaDescription(t, adm, group, topic, protocol, m1)
	if err := adm.DeleteConsumerGroup(group); !errors.Is(err, sarama.ErrNonEmptyGroup) {
		t.Errorf("DeleteConsumerGroup(%s) with a member: %v, want %v", group, err, sarama.ErrNonEmptyGroup)
	}
	if offsetDelete {
		if err := adm.DeleteConsumerGroupOffset(group, topic, 0); !errors.Is(err, sarama.ErrGroupSubscribedToTopic) {
			t.Errorf("DeleteConsumerGroupOffset(%s, %s/0) while subscribed: %v, want %v", group, topic, err, sarama.ErrGroupSubscribedToTopic)
		}
	}

	// A second member joins: 2 partitions each, a new generation.
	m2 := startSaramaGroupMember(t, b, v, newStrategy(), group, topic, name+"-m2", instance(2), col)
	awaitSaramaAssignment(t, "second member joined", []int{2, 2}, m1, m2)
	if _, _, gen := m1.h.claims(); gen <= gen1 {
		t.Errorf("generation %d after the second member joined, want > %d", gen, gen1)
	}
	produceSaramaGroupBatch(t, b, topic, ends, 50)
	awaitSaramaConsumed(t, "two members", col, ends, m1, m2)
	for _, m := range []*saramaGroupMember{m1, m2} {
		ps, _, _ := m.h.claims()
		col.mu.Lock()
		for p := range int32(saramaGroupPartitions) {
			for o := ends[p] - 50; o < ends[p]; o++ {
				if who := col.by[p][o]; who == m.name && !slices.Contains(ps, p) {
					t.Errorf("%s consumed %s/%d@%d but owns %v", m.name, topic, p, o, ps)
				}
			}
		}
		col.mu.Unlock()
	}
	awaitSaramaCommitted(t, adm, group, topic, ends)
	checkSaramaDescription(t, adm, group, topic, protocol, m1, m2)

	// Member 2 goes; member 1 takes everything back.
	_, _, gen2 := m1.h.claims()
	m2.close(t)
	if static {
		// A static member does not leave on Close: it stays until
		// removed (or its session times out).
		ds, err := adm.DescribeConsumerGroups([]string{group})
		if err != nil || len(ds) != 1 || len(ds[0].Members) != 2 {
			t.Errorf("DescribeConsumerGroups(%s) after a static member closed: %+v (%v), want it still with 2 members", group, ds, err)
		}
		removeStatic(m2)
	}
	awaitSaramaAssignment(t, "second member left", []int{4}, m1)
	if _, _, gen := m1.h.claims(); gen <= gen2 {
		t.Errorf("generation %d after the second member left, want > %d", gen, gen2)
	}
	produceSaramaGroupBatch(t, b, topic, ends, 10)
	awaitSaramaConsumed(t, "one member again", col, ends, m1)
	awaitSaramaCommitted(t, adm, group, topic, ends)
	checkSaramaDescription(t, adm, group, topic, protocol, m1)
	m1.close(t)
	if static {
		removeStatic(m1)
	}
	for _, m := range []*saramaGroupMember{m1, m2} {
		if errs := m.errors(); len(errs) > 0 {
			t.Errorf("member %s reported errors: %v", m.name, errs)
		}
	}

	// The empty group.
	checkSaramaDescription(t, adm, group, topic, protocol)
	if pt, ok := saramaListed(t, adm, group); !ok || pt != "consumer" {
		t.Errorf("ListConsumerGroups: empty %s listed %v with protocol type %q, want listed with consumer", group, ok, pt)
	}
	if got, _ := saramaCommitted(t, adm, group, topic); !slices.Equal(got, ends) {
		t.Errorf("ListConsumerGroupOffsets(%s) once empty: %v, want %v", group, got, ends)
	}

	// OffsetManager (OffsetFetch, then OffsetCommit without a generation)
	// rewinds partition 0.
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		t.Fatalf("NewOffsetManagerFromClient(%s): %v", group, err)
	}
	pom, err := om.ManagePartition(topic, 0)
	if err != nil {
		t.Fatalf("ManagePartition(%s/0): %v", topic, err)
	}
	if next, _ := pom.NextOffset(); next != ends[0] {
		t.Errorf("OffsetManager: NextOffset of %s/0 = %d, want the committed %d", topic, next, ends[0])
	}
	pom.ResetOffset(7, "sarama-meta")
	om.Commit()
	select {
	case perr := <-pom.Errors():
		t.Errorf("OffsetManager commit of %s/0: %v", topic, perr)
	default:
	}
	pom.AsyncClose()
	if err := om.Close(); err != nil {
		t.Errorf("closing the OffsetManager: %v", err)
	}
	got, metas := saramaCommitted(t, adm, group, topic)
	if want := append([]int64{7}, ends[1:]...); !slices.Equal(got, want) || metas[0] != "sarama-meta" {
		t.Errorf("ListConsumerGroupOffsets(%s) after the OffsetManager rewound partition 0: %v (metadata %q), want %v (sarama-meta)", group, got, metas[0], want)
	}

	// OffsetDelete of partition 1 on the empty group.
	if offsetDelete {
		if err := adm.DeleteConsumerGroupOffset(group, topic, 1); err != nil {
			t.Errorf("DeleteConsumerGroupOffset(%s, %s/1) on the empty group: %v", group, topic, err)
		}
		if got, _ := saramaCommitted(t, adm, group, topic); got[1] != -1 || got[0] != 7 || got[2] != ends[2] {
			t.Errorf("ListConsumerGroupOffsets(%s) after DeleteConsumerGroupOffset(%s/1): %v, want [7 -1 %d %d]", group, topic, got, ends[2], ends[3])
		}
	}

	// DeleteGroups.
	if err := adm.DeleteConsumerGroup(group); err != nil {
		t.Fatalf("DeleteConsumerGroup(%s) once empty: %v", group, err)
	}
	if _, ok := saramaListed(t, adm, group); ok {
		t.Errorf("ListConsumerGroups: %s still listed after DeleteConsumerGroup", group)
	}
	if got, _ := saramaCommitted(t, adm, group, topic); !slices.Equal(got, []int64{-1, -1, -1, -1}) {
		t.Errorf("ListConsumerGroupOffsets(%s) after DeleteConsumerGroup: %v, want none", group, got)
	}
	if err := adm.DeleteConsumerGroup(group); !errors.Is(err, sarama.ErrGroupIDNotFound) {
		t.Errorf("DeleteConsumerGroup(%s) again: %v, want %v", group, err, sarama.ErrGroupIDNotFound)
	}
}
