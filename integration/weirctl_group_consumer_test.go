package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// `weirctl group describe` and `group list` on a KIP-848 consumer-protocol
// group (two franz-go members with the server-side assignor) beside a
// classic group on the same topic.
func TestWeirctlGroupConsumerProtocol(t *testing.T) {
	b := StartBroker(t,
		WithSet("cluster.group_initial_rebalance_delay_ms", "0"),
		WithSet("cluster.group_consumer_heartbeat_interval_ms", "300"),
		// The static member keeps its place this long after it leaves.
		WithSet("cluster.group_consumer_session_timeout_ms", "3000"),
	)
	w := newWeirctl(t, b)
	const (
		topic   = "weirctl-cg-topic"
		group   = "weirctl-cg"
		classic = "weirctl-cg-classic"
		parts   = 6
		perPart = 10
	)
	step := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) {
			t.FailNow() // later steps build on earlier ones
		}
	}

	CreateTopic(t, b, topic, parts, nil)
	recs := make([]*kgo.Record, 0, parts*perPart)
	for i := range perPart {
		for p := range int32(parts) {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	produceAll(t, b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), recs, 15*time.Second)

	// consume runs a group member, committing what it consumed every
	// 300ms, until stop (at the latest when the test ends).
	consume := func(grp string, opts ...kgo.Opt) (stop func(testing.TB)) {
		cl := b.Client(t, append([]kgo.Opt{
			kgo.ConsumerGroup(grp),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(200 * time.Millisecond),
			kgo.AutoCommitInterval(300 * time.Millisecond),
		}, opts...)...)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
		var once sync.Once
		stop = func(t testing.TB) {
			once.Do(func() {
				cancel()
				wg.Wait()
				closeBounded(t, cl)
			})
		}
		t.Cleanup(func() { stop(t) })
		return stop
	}

	var stopA, stopB func(testing.TB)
	step("two consumer-protocol members", func(t *testing.T) {
		stopA = consume(group, kgo.ServerSideBalancer(), kgo.ClientID("weirctl-cg-a"), kgo.Rack("rack-a"))
		stopB = consume(group, kgo.ServerSideBalancer(), kgo.ClientID("weirctl-cg-b"), kgo.InstanceID("static-b"))

		d := waitGroup(t, w, group, 60*time.Second, "Stable with two reconciled members, everything committed", func(d wcGroupDescription) bool {
			if d.Error != "" || d.State != "Stable" || len(d.Members) != 2 || d.TargetAssignmentEpoch == nil || d.TotalLag != 0 {
				return false
			}
			for _, m := range d.Members {
				if len(m.Assignment) == 0 || !slices.EqualFunc(m.Assignment, m.TargetAssignment, assignedTopicEqual) ||
					m.MemberEpoch == nil || *m.MemberEpoch != *d.TargetAssignmentEpoch {
					return false
				}
			}
			for _, p := range d.Partitions {
				if p.CommittedOffset != perPart {
					return false
				}
			}
			return len(d.Partitions) == parts
		})

		if d.GroupType != "consumer" || d.ProtocolType != "consumer" || d.Assignor != "uniform" || d.Protocol != "uniform" || d.MemberCount != 2 {
			t.Errorf("summary: %+v", d)
		}
		if d.GroupEpoch == nil || *d.GroupEpoch <= 0 || *d.TargetAssignmentEpoch <= 0 || *d.TargetAssignmentEpoch > *d.GroupEpoch {
			t.Errorf("epochs: group %v, target assignment %v", d.GroupEpoch, d.TargetAssignmentEpoch)
		}
		if d.CoordinatorID != int32(b.NodeID) || d.CoordinatorAddr != b.KafkaAddr {
			t.Errorf("coordinator %d (%s), want %d (%s)", d.CoordinatorID, d.CoordinatorAddr, b.NodeID, b.KafkaAddr)
		}

		owner := map[int32]string{}
		byClient := map[string]wcGroupMember{}
		for _, m := range d.Members {
			byClient[m.ClientID] = m
			if m.MemberID == "" || m.Host == "" || len(m.SubscribedTopics) != 1 || m.SubscribedTopics[0] != topic || m.SubscribedTopicRegex != nil {
				t.Errorf("member: %+v", m)
			}
			if len(m.Assignment) != 1 || m.Assignment[0].Topic != topic {
				t.Fatalf("member %s assignment %+v, want partitions of %s only", m.MemberID, m.Assignment, topic)
			}
			for _, p := range m.Assignment[0].Partitions {
				if prev, dup := owner[p]; dup {
					t.Errorf("partition %d assigned to both %s and %s", p, prev, m.MemberID)
				}
				owner[p] = m.MemberID
			}
		}
		if len(owner) != parts {
			t.Errorf("the members own %d of %d partitions: %+v", len(owner), parts, d.Members)
		}
		ma, mb := byClient["weirctl-cg-a"], byClient["weirctl-cg-b"]
		if ma.Rack == nil || *ma.Rack != "rack-a" || ma.InstanceID != nil {
			t.Errorf("member a: rack %v, instance %v", ma.Rack, ma.InstanceID)
		}
		if mb.InstanceID == nil || *mb.InstanceID != "static-b" || mb.Rack != nil {
			t.Errorf("member b: rack %v, instance %v", mb.Rack, mb.InstanceID)
		}
		for _, p := range d.Partitions {
			if p.Topic != topic || p.MemberID != owner[p.Partition] || p.LogEndOffset != perPart || p.Lag != 0 || p.Error != "" {
				t.Errorf("partition row %+v (owner %s)", p, owner[p.Partition])
			}
		}

		table := w.ok(t, "", "group", "describe", group).stdout
		rows := map[string]string{}
		for _, l := range strings.Split(table, "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				rows[f[0]] = strings.Join(f[1:], " ")
			}
		}
		for k, want := range map[string]string{
			"GROUP-TYPE":              "consumer",
			"STATE":                   "Stable",
			"ASSIGNOR":                "uniform",
			"GROUP-EPOCH":             fmt.Sprint(*d.GroupEpoch),
			"TARGET-ASSIGNMENT-EPOCH": fmt.Sprint(*d.TargetAssignmentEpoch),
			"MEMBERS":                 "2",
			"TOTAL-LAG":               "0",
			"MEMBER-ID":               "INSTANCE-ID RACK CLIENT-ID HOST EPOCH SUBSCRIPTION ASSIGNMENT TARGET-ASSIGNMENT",
		} {
			if rows[k] != want {
				t.Errorf("table %s: %q, want %q\n%s", k, rows[k], want, table)
			}
		}
		// Stable: each member's target assignment is its current one.
		for _, m := range d.Members {
			cur := topic + fmt.Sprint(m.Assignment[0].Partitions) // weirctl-cg-topic[0 2 4]
			if !strings.HasSuffix(rows[m.MemberID], " "+cur+" "+cur) {
				t.Errorf("member %s row %q, want assignment and target %s\n%s", m.MemberID, rows[m.MemberID], cur, table)
			}
		}
	})

	var stopClassic func(testing.TB)
	step("a classic group beside it", func(t *testing.T) {
		stopClassic = consume(classic, kgo.ClientID("weirctl-cg-classic"))
		d := waitGroup(t, w, classic, 30*time.Second, "Stable with one member", func(d wcGroupDescription) bool {
			return d.State == "Stable" && d.MemberCount == 1 && len(d.Members[0].Assignment) == 1
		})
		m := d.Members[0]
		if d.GroupType != "classic" || d.ProtocolType != "consumer" || d.Protocol != "cooperative-sticky" ||
			d.GroupEpoch != nil || d.TargetAssignmentEpoch != nil || d.Error != "" {
			t.Errorf("classic summary: %+v", d)
		}
		if m.ClientID != "weirctl-cg-classic" || m.MemberEpoch != nil || m.Rack != nil || m.TargetAssignment != nil ||
			len(m.Assignment[0].Partitions) != parts || !slices.Equal(m.SubscribedTopics, []string{topic}) {
			t.Errorf("classic member: %+v", m)
		}
		table := w.ok(t, "", "group", "describe", classic).stdout
		for _, want := range []string{"GROUP-TYPE", "classic", "PROTOCOL-TYPE", "cooperative-sticky"} {
			if !strings.Contains(table, want) {
				t.Errorf("classic table lacks %q:\n%s", want, table)
			}
		}
		if strings.Contains(table, "GROUP-EPOCH") {
			t.Errorf("classic table shows epochs:\n%s", table)
		}

		// Both at once, in the order asked.
		ds := decodeJSON[[]wcGroupDescription](t, w.ok(t, "", "group", "describe", classic, group, "--format", "json"))
		if len(ds) != 2 || ds[0].Group != classic || ds[0].GroupType != "classic" || ds[1].Group != group || ds[1].GroupType != "consumer" {
			t.Errorf("describe of both: %+v", ds)
		}
	})

	step("list shows each group's type", func(t *testing.T) {
		listed := listGroupsJSON(t, w)
		if s := listed[group]; s.GroupType != "consumer" || s.ProtocolType != "consumer" || s.State != "Stable" || s.Members != 2 || s.Error != "" {
			t.Errorf("consumer group listed as %+v", s)
		}
		if s := listed[classic]; s.GroupType != "classic" || s.State != "Stable" || s.Members != 1 || s.Error != "" {
			t.Errorf("classic group listed as %+v", s)
		}
		if s, ok := listGroupsJSON(t, w, "--state", "Stable")[group]; !ok || s.Members != 2 {
			t.Errorf("--state Stable: %+v (listed: %v)", s, ok)
		}
		table := w.ok(t, "", "group", "list").stdout
		var row, header string
		for _, l := range strings.Split(table, "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) > 0 && f[0] == "GROUP":
				header = strings.Join(f, " ")
			case len(f) > 0 && f[0] == group:
				row = strings.Join(f, " ")
			}
		}
		if header != "GROUP STATE GROUP-TYPE PROTOCOL-TYPE MEMBERS" || row != group+" Stable consumer consumer 2" {
			t.Errorf("table:\n%s", table)
		}
	})

	step("seek refuses the active consumer group", func(t *testing.T) {
		w.fails(t, "2 active members", "group", "seek", group, "--to", "start")
	})

	step("members gone: offsets and lag remain", func(t *testing.T) {
		stopA(t)
		stopB(t)
		stopClassic(t)
		d := waitGroup(t, w, group, 30*time.Second, "Empty after both members left", func(d wcGroupDescription) bool {
			return d.State == "Empty" && d.MemberCount == 0
		})
		if d.GroupType != "consumer" || d.GroupEpoch == nil || d.Assignor != "uniform" || len(d.Members) != 0 || d.Error != "" {
			t.Errorf("empty consumer group: %+v", d)
		}
		checkPartitions(t, d, topic, parts, perPart, perPart)

		r := decodeJSON[wcSeekResult](t, w.ok(t, "", "group", "seek", group, "--to", "start", "--format", "json"))
		checkSeekRows(t, r, topic, parts, perPart, 0)
		d = describeGroupJSON(t, w, group)
		checkPartitions(t, d, topic, parts, 0, perPart)
		if d.TotalLag != parts*perPart {
			t.Errorf("total lag %d after seek to start, want %d", d.TotalLag, parts*perPart)
		}
	})

	step("deleted", func(t *testing.T) {
		rs := decodeJSON[[]wcGroupResult](t, w.ok(t, "", "group", "delete", group, classic, "--format", "json"))
		if len(rs) != 2 || rs[0].Error != "" || rs[1].Error != "" {
			t.Errorf("delete: %+v", rs)
		}
		w.fails(t, "GROUP_ID_NOT_FOUND", "group", "describe", group)
	})
}

func assignedTopicEqual(a, b wcAssignedTopic) bool {
	return a.Topic == b.Topic && slices.Equal(a.Partitions, b.Partitions)
}
