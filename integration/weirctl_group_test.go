package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Shapes of `weirctl group ... --format json`, restated so that a change to
// the CLI's contract breaks this test rather than passing silently.
type (
	wcGroupSummary struct {
		Group         string `json:"group"`
		State         string `json:"state"`
		GroupType     string `json:"group_type"`
		ProtocolType  string `json:"protocol_type"`
		Members       int    `json:"members"`
		CoordinatorID int32  `json:"coordinator_id"`
		Error         string `json:"error"`
	}
	wcAssignedTopic struct {
		Topic      string  `json:"topic"`
		Partitions []int32 `json:"partitions"`
	}
	wcGroupMember struct {
		MemberID             string            `json:"member_id"`
		InstanceID           *string           `json:"instance_id"`
		Rack                 *string           `json:"rack"`
		ClientID             string            `json:"client_id"`
		Host                 string            `json:"host"`
		MemberEpoch          *int32            `json:"member_epoch"`
		SubscribedTopics     []string          `json:"subscribed_topics"`
		SubscribedTopicRegex *string           `json:"subscribed_topic_regex"`
		Assignment           []wcAssignedTopic `json:"assignment"`
		TargetAssignment     []wcAssignedTopic `json:"target_assignment"`
	}
	wcGroupPartition struct {
		Topic           string `json:"topic"`
		Partition       int32  `json:"partition"`
		CommittedOffset int64  `json:"committed_offset"`
		LogStartOffset  int64  `json:"log_start_offset"`
		LogEndOffset    int64  `json:"log_end_offset"`
		Lag             int64  `json:"lag"`
		MemberID        string `json:"member_id"`
		Error           string `json:"error"`
	}
	wcGroupDescription struct {
		Group                 string             `json:"group"`
		GroupType             string             `json:"group_type"`
		State                 string             `json:"state"`
		ProtocolType          string             `json:"protocol_type"`
		Protocol              string             `json:"protocol"`
		Assignor              string             `json:"assignor"`
		GroupEpoch            *int32             `json:"group_epoch"`
		TargetAssignmentEpoch *int32             `json:"target_assignment_epoch"`
		CoordinatorID         int32              `json:"coordinator_id"`
		CoordinatorAddr       string             `json:"coordinator_addr"`
		MemberCount           int                `json:"member_count"`
		TotalLag              int64              `json:"total_lag"`
		Members               []wcGroupMember    `json:"members"`
		Partitions            []wcGroupPartition `json:"partitions"`
		Error                 string             `json:"error"`
		ErrorMessage          string             `json:"error_message"`
	}
	wcGroupResult struct {
		Group        string `json:"group"`
		Error        string `json:"error"`
		ErrorMessage string `json:"error_message"`
	}
	wcSeekRow struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Before    int64  `json:"before"`
		After     int64  `json:"after"`
		Note      string `json:"note"`
		Error     string `json:"error"`
	}
	wcSeekResult struct {
		Group      string      `json:"group"`
		Target     string      `json:"target"`
		DryRun     bool        `json:"dry_run"`
		Partitions []wcSeekRow `json:"partitions"`
	}
)

func describeGroupJSON(t testing.TB, w *weirctl, group string) wcGroupDescription {
	t.Helper()
	ds := decodeJSON[[]wcGroupDescription](t, w.ok(t, "", "group", "describe", group, "--format", "json"))
	if len(ds) != 1 || ds[0].Group != group {
		t.Fatalf("describe %s returned %+v", group, ds)
	}
	return ds[0]
}

func listGroupsJSON(t testing.TB, w *weirctl, args ...string) map[string]wcGroupSummary {
	t.Helper()
	list := decodeJSON[[]wcGroupSummary](t, w.ok(t, "", append([]string{"group", "list", "--format", "json"}, args...)...))
	m := make(map[string]wcGroupSummary, len(list))
	for _, s := range list {
		m[s.Group] = s
	}
	return m
}

// waitGroup polls `group describe` (≤timeout) until ok accepts the result.
func waitGroup(t testing.TB, w *weirctl, group string, timeout time.Duration, what string, ok func(wcGroupDescription) bool) wcGroupDescription {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last weirctlResult
	for {
		last = w.exec(t, 30*time.Second, "", "group", "describe", group, "--format", "json")
		if last.exitCode == 0 {
			ds := decodeJSON[[]wcGroupDescription](t, last)
			if len(ds) == 1 && ok(ds[0]) {
				return ds[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not %s within %v; last describe:\n%s", group, what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPartitions asserts committed offset, log end and lag for partitions
// 0..n-1 of topic in a describe result.
func checkPartitions(t testing.TB, d wcGroupDescription, topic string, n int, committed, end int64) {
	t.Helper()
	var got []wcGroupPartition
	for _, p := range d.Partitions {
		if p.Topic == topic {
			got = append(got, p)
		}
	}
	if len(got) != n {
		t.Fatalf("group %s: %d partitions of %s in describe, want %d: %+v", d.Group, len(got), topic, n, d.Partitions)
	}
	for i, p := range got {
		wantLag := end - committed
		if committed < 0 {
			wantLag = end
		}
		if p.Partition != int32(i) || p.CommittedOffset != committed || p.LogEndOffset != end || p.Lag != wantLag || p.Error != "" {
			t.Errorf("group %s %s/%d: %+v; want committed %d, log end %d, lag %d", d.Group, topic, i, p, committed, end, wantLag)
		}
	}
}

// committedOffsets reads the group's commits straight from the broker with
// kadm, to tell a weirctl mistake from a broker one.
func committedOffsets(t testing.TB, b *Broker, group string) map[string]map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resps, err := b.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	out := map[string]map[int32]int64{}
	resps.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Errorf("OffsetFetch %s %s/%d: %v", group, o.Topic, o.Partition, o.Err)
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out
}

func checkSeekRows(t testing.TB, r wcSeekResult, topic string, n int, before, after int64) {
	t.Helper()
	if len(r.Partitions) != n {
		t.Fatalf("seek touched %d partitions, want %d: %+v", len(r.Partitions), n, r)
	}
	for i, p := range r.Partitions {
		if p.Topic != topic || p.Partition != int32(i) || p.Before != before || p.After != after || p.Error != "" {
			t.Errorf("seek row %d: %+v; want %s/%d %d -> %d", i, p, topic, i, before, after)
		}
	}
}

// closeBounded closes a group client, failing the test if leaving the group
// hangs.
func closeBounded(t testing.TB, cl *kgo.Client) {
	t.Helper()
	done := make(chan struct{})
	go func() { cl.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("closing the group consumer (LeaveGroup) did not finish within 20s")
	}
}

func TestWeirctlGroup(t *testing.T) {
	b := StartBroker(t, WithSet("cluster.group_initial_rebalance_delay_ms", "0"))
	w := newWeirctl(t, b)
	const (
		topic      = "weirctl-group-topic"
		group      = "weirctl-group"
		offsetOnly = "weirctl-group-offsets-only"
		parts      = 3
		perPart    = 20
		committed  = 10 // what the first consumer commits per partition
	)
	step := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) {
			t.FailNow() // later steps build on earlier ones
		}
	}

	// Record i of every partition has timestamp base+i s, so seeking to
	// base+5s must land on offset 5.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	CreateTopic(t, b, topic, parts, nil)
	recs := make([]*kgo.Record, 0, parts*perPart)
	for i := range perPart {
		for p := range int32(parts) {
			recs = append(recs, &kgo.Record{
				Topic: topic, Partition: p,
				Value:     fmt.Appendf(nil, "p%d-%d", p, i),
				Timestamp: base.Add(time.Duration(i) * time.Second),
			})
		}
	}
	produceAll(t, b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), recs, 15*time.Second)

	groupClient := func(t testing.TB) *kgo.Client {
		return b.Client(t,
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ClientID("weirctl-group-test"),
		)
	}

	step("consume, commit part, leave", func(t *testing.T) {
		cl := groupClient(t)
		at := map[int32]*kgo.Record{} // the record at offset committed-1, per partition
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for len(at) < parts && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(tp string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("group consumer: fetch %s/%d: %v", tp, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset == committed-1 {
					at[r.Partition] = r
				}
			})
		}
		if len(at) < parts {
			t.Fatalf("group consumer reached offset %d on %d of %d partitions within 30s", committed-1, len(at), parts)
		}
		var toCommit []*kgo.Record
		for _, r := range at {
			toCommit = append(toCommit, r)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), requestTimeout)
		defer ccancel()
		if err := cl.CommitRecords(cctx, toCommit...); err != nil {
			t.Fatalf("group consumer: OffsetCommit of offset %d on every partition: %v", committed, err)
		}
		closeBounded(t, cl)

		c := committedOffsets(t, b, group)
		for p := range int32(parts) {
			if c[topic][p] != committed {
				t.Errorf("broker OffsetFetch: %s/%d committed %d, want %d (all: %v)", topic, p, c[topic][p], committed, c)
			}
		}
	})

	step("list shows the group Empty", func(t *testing.T) {
		waitGroup(t, w, group, 15*time.Second, "Empty after the consumer left", func(d wcGroupDescription) bool {
			return d.State == "Empty" && d.MemberCount == 0
		})
		s, ok := listGroupsJSON(t, w)[group]
		if !ok {
			t.Fatalf("group %s not listed", group)
		}
		if s.State != "Empty" || s.GroupType != "classic" || s.ProtocolType != "consumer" || s.Members != 0 || s.Error != "" {
			t.Errorf("list entry: %+v, want Empty, classic, consumer, 0 members", s)
		}
		if _, ok := listGroupsJSON(t, w, "--state", "Empty")[group]; !ok {
			t.Errorf("--state Empty does not list %s", group)
		}
		if _, ok := listGroupsJSON(t, w, "--state", "Stable,PreparingRebalance")[group]; ok {
			t.Errorf("--state Stable,PreparingRebalance lists the Empty group %s", group)
		}
		table := w.ok(t, "", "group", "list").stdout
		if !strings.HasPrefix(table, "GROUP") || !strings.Contains(table, group) {
			t.Errorf("table output:\n%s", table)
		}
	})

	step("describe shows commits and lag", func(t *testing.T) {
		d := describeGroupJSON(t, w, group)
		if d.State != "Empty" || d.GroupType != "classic" || d.ProtocolType != "consumer" || d.MemberCount != 0 || len(d.Members) != 0 || d.Error != "" {
			t.Errorf("summary: %+v", d)
		}
		if d.GroupEpoch != nil || d.TargetAssignmentEpoch != nil {
			t.Errorf("a classic group has no epochs: %+v", d)
		}
		if d.CoordinatorID != int32(b.NodeID) || d.CoordinatorAddr != b.KafkaAddr {
			t.Errorf("coordinator %d (%s), want %d (%s)", d.CoordinatorID, d.CoordinatorAddr, b.NodeID, b.KafkaAddr)
		}
		checkPartitions(t, d, topic, parts, committed, perPart)
		if d.TotalLag != parts*(perPart-committed) {
			t.Errorf("total lag %d, want %d", d.TotalLag, parts*(perPart-committed))
		}
		table := w.ok(t, "", "group", "describe", group).stdout
		for _, want := range []string{"STATE", "Empty", "TOTAL-LAG", "COMMITTED-OFFSET", "LOG-END-OFFSET", topic} {
			if !strings.Contains(table, want) {
				t.Errorf("table output lacks %q:\n%s", want, table)
			}
		}
	})

	step("seek dry run commits nothing", func(t *testing.T) {
		r := decodeJSON[wcSeekResult](t, w.ok(t, "", "group", "seek", group, "--to", "start", "--dry-run", "--format", "json"))
		if !r.DryRun || r.Target != "start" {
			t.Errorf("result: %+v", r)
		}
		checkSeekRows(t, r, topic, parts, committed, 0)
		checkPartitions(t, describeGroupJSON(t, w, group), topic, parts, committed, perPart)
	})

	step("seek to start", func(t *testing.T) {
		r := decodeJSON[wcSeekResult](t, w.ok(t, "", "group", "seek", group, "--to", "start", "--format", "json"))
		checkSeekRows(t, r, topic, parts, committed, 0)
		d := describeGroupJSON(t, w, group)
		checkPartitions(t, d, topic, parts, 0, perPart)
		if d.TotalLag != parts*perPart {
			t.Errorf("total lag %d after seek to start, want %d", d.TotalLag, parts*perPart)
		}
	})

	step("seek to timestamp, end and offset", func(t *testing.T) {
		ts := base.Add(5 * time.Second).UnixMilli()
		r := decodeJSON[wcSeekResult](t, w.ok(t, "", "group", "seek", group, "--to", fmt.Sprintf("@%d", ts), "--format", "json"))
		checkSeekRows(t, r, topic, parts, 0, 5)
		checkPartitions(t, describeGroupJSON(t, w, group), topic, parts, 5, perPart)

		r = decodeJSON[wcSeekResult](t, w.ok(t, "", "group", "seek", group, "--to", "end", "--topics", topic, "--format", "json"))
		checkSeekRows(t, r, topic, parts, 5, perPart)
		checkPartitions(t, describeGroupJSON(t, w, group), topic, parts, perPart, perPart)

		table := w.ok(t, "", "group", "seek", group, "--to", "7").stdout
		if !strings.HasPrefix(table, "TOPIC") || strings.Count(table, "\n") != parts+1 {
			t.Errorf("table output:\n%s", table)
		}
		checkPartitions(t, describeGroupJSON(t, w, group), topic, parts, 7, perPart)
		c := committedOffsets(t, b, group)
		for p := range int32(parts) {
			if c[topic][p] != 7 {
				t.Errorf("broker OffsetFetch after seek to 7: %s/%d at %d", topic, p, c[topic][p])
			}
		}
	})

	step("offsets-only group", func(t *testing.T) {
		w.fails(t, "no committed offsets", "group", "seek", offsetOnly, "--to", "start")
		r := decodeJSON[wcSeekResult](t, w.ok(t, "", "group", "seek", offsetOnly, "--to", "4", "--topics", topic, "--format", "json"))
		checkSeekRows(t, r, topic, parts, -1, 4)
		d := describeGroupJSON(t, w, offsetOnly)
		if d.State != "Empty" || d.MemberCount != 0 || d.Error != "" {
			t.Errorf("group that only committed offsets: %+v, want Empty without members", d)
		}
		checkPartitions(t, d, topic, parts, 4, perPart)
		if s, ok := listGroupsJSON(t, w)[offsetOnly]; !ok || s.State != "Empty" || s.Members != 0 {
			t.Errorf("list entry for %s: %+v (listed: %v)", offsetOnly, s, ok)
		}
	})

	step("active member blocks seek and delete", func(t *testing.T) {
		cl := groupClient(t)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // keep consuming (and heartbeating) for the whole step
			defer wg.Done()
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
		defer func() {
			cancel()
			wg.Wait()
		}()

		d := waitGroup(t, w, group, 20*time.Second, "Stable with one member", func(d wcGroupDescription) bool {
			return d.State == "Stable" && d.MemberCount == 1
		})
		m := d.Members[0]
		if m.MemberID == "" || m.ClientID != "weirctl-group-test" || m.Host == "" {
			t.Errorf("member: %+v", m)
		}
		if d.GroupType != "classic" || d.Protocol != "cooperative-sticky" || d.Assignor != "cooperative-sticky" {
			t.Errorf("classic group: type %q, protocol %q, assignor %q", d.GroupType, d.Protocol, d.Assignor)
		}
		if m.MemberEpoch != nil || m.TargetAssignment != nil || len(m.SubscribedTopics) != 1 || m.SubscribedTopics[0] != topic {
			t.Errorf("classic member: epoch %v, target %v, subscribed %q", m.MemberEpoch, m.TargetAssignment, m.SubscribedTopics)
		}
		if len(m.Assignment) != 1 || m.Assignment[0].Topic != topic || len(m.Assignment[0].Partitions) != parts {
			t.Errorf("member assignment %+v, want all %d partitions of %s", m.Assignment, parts, topic)
		}
		for _, p := range d.Partitions {
			if p.MemberID != m.MemberID {
				t.Errorf("partition %s/%d owned by %q, want %q", p.Topic, p.Partition, p.MemberID, m.MemberID)
			}
		}
		if s := listGroupsJSON(t, w, "--state", "Stable")[group]; s.Members != 1 {
			t.Errorf("list --state Stable: %+v", s)
		}

		w.fails(t, "active members", "group", "seek", group, "--to", "start")
		if c := committedOffsets(t, b, group); c[topic][0] != 7 {
			t.Errorf("a refused seek changed the commits: %v", c)
		}

		w.fails(t, "NON_EMPTY_GROUP", "group", "delete", group)
		res := w.exec(t, 60*time.Second, "", "group", "delete", offsetOnly, group, "--format", "json")
		if res.exitCode == 0 {
			t.Fatalf("deleting a non-empty group must fail:\n%s", res)
		}
		rs := decodeJSON[[]wcGroupResult](t, res)
		if len(rs) != 2 || rs[0].Group != offsetOnly || rs[0].Error != "" || rs[1].Group != group || rs[1].Error != "NON_EMPTY_GROUP" {
			t.Errorf("delete of [empty, active]: %+v", rs)
		}

		cancel()
		wg.Wait()
		closeBounded(t, cl)
	})

	step("delete the empty group", func(t *testing.T) {
		waitGroup(t, w, group, 15*time.Second, "Empty after the consumer left", func(d wcGroupDescription) bool {
			return d.State == "Empty" && d.MemberCount == 0
		})
		rs := decodeJSON[[]wcGroupResult](t, w.ok(t, "", "group", "delete", group, "--format", "json"))
		if len(rs) != 1 || rs[0].Error != "" {
			t.Errorf("delete: %+v", rs)
		}
		listed := listGroupsJSON(t, w)
		for _, g := range []string{group, offsetOnly} {
			if s, ok := listed[g]; ok {
				t.Errorf("deleted group %s still listed: %+v", g, s)
			}
		}
		if c := committedOffsets(t, b, group); len(c) != 0 {
			t.Errorf("deleted group still has commits: %v", c)
		}
		w.fails(t, "GROUP_ID_NOT_FOUND", "group", "delete", group)
		w.fails(t, "GROUP_ID_NOT_FOUND", "group", "describe", group)
	})
}
