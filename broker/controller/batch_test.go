package controller

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/weir-broker/weir/raft"
)

// reportsTopic is a harness with one topic of n partitions, replicas
// {1,2,3} rotated, none of them led yet.
func reportsTopic(t testing.TB, n int) *harness {
	h := &harness{t: t, s: New(testOptions()), now: t0}
	h.ok(InitCluster{ClusterID: "c"})
	h.register(3, 0)
	assignment := make([][]int32, n)
	for i := range assignment {
		r := int32(i % 3)
		assignment[i] = []int32{r + 1, (r+1)%3 + 1, (r+2)%3 + 1}
	}
	h.ok(CreateTopic{Name: "t", ID: topicID(1), Partitions: int32(n), ReplicationFactor: 3, Assignment: assignment})
	return h
}

// leaderReports encodes, from index first on, what a topic's leaders
// send when they are elected: a report of each partition's leadership,
// then one of its ISR; and, among them, a report the controller refuses
// (term 0) and a repeated one.
func leaderReports(t testing.TB, n int, first uint64, timeMs int64) []raft.Entry {
	var cmds []Command
	for i := range n {
		cmds = append(cmds, ReportLeader{TopicID: topicID(1), Partition: int32(i), Leader: int32(i%3) + 1, LeaderEpoch: 1, Term: 1})
		if i == n/2 {
			cmds = append(cmds,
				ReportLeader{TopicID: topicID(1), Partition: int32(i), Leader: int32(i%3) + 1, LeaderEpoch: 1, Term: 0},
				ReportLeader{TopicID: topicID(1), Partition: int32(i), Leader: int32(i%3) + 1, LeaderEpoch: 1, Term: 1})
		}
	}
	for i := range n {
		cmds = append(cmds, ReportLeader{TopicID: topicID(1), Partition: int32(i), Leader: int32(i%3) + 1, LeaderEpoch: 1, Term: 1, ISR: []int32{1, 2, 3}})
	}
	entries := make([]raft.Entry, len(cmds))
	for i, c := range cmds {
		b, err := Encode(Entry{TimeMs: timeMs, Cmd: c})
		if err != nil {
			t.Fatal(err)
		}
		entries[i] = raft.Entry{Index: first + uint64(i), Term: 1, Data: b}
	}
	return entries
}

func TestApplyBatchOfReportsAppliesAsOneAtATime(t *testing.T) {
	const n = 50
	one, batched := reportsTopic(t, n), reportsTopic(t, n)
	entries := leaderReports(t, n, one.index+1, one.now)

	var want []Result
	for _, e := range entries {
		want = append(want, one.s.Apply(e.Index, e.Data))
	}
	before := batched.s.View()
	var beforeSnap bytes.Buffer
	if err := before.EncodeSnapshot(&beforeSnap); err != nil {
		t.Fatal(err)
	}
	changes := 0
	batched.s.Subscribe(func(Change) { changes++ })
	// Batches of 7 split runs of reports about the topic at odd places.
	var got []Result
	for start := 0; start < len(entries); start += 7 {
		got = append(got, batched.s.applyBatch(entries[start:min(start+7, len(entries))])...)
	}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	refused := 0
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("entry %d: batched %+v, one at a time %+v", entries[i].Index, got[i], want[i])
		}
		if want[i].Err != nil {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("%d refusals among the reports, want the one with term 0", refused)
	}
	wantSnap, _ := one.s.SnapshotBytes()
	gotSnap, _ := batched.s.SnapshotBytes()
	if !bytes.Equal(gotSnap, wantSnap) {
		t.Fatal("the batches end in another state than the entries one at a time")
	}
	var again bytes.Buffer
	if err := before.EncodeSnapshot(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), beforeSnap.Bytes()) {
		t.Fatal("applying the batches changed the view published before them")
	}
	if p, _ := batched.s.View().Partition(topicID(1), n-1); p.Leader != int32((n-1)%3)+1 || len(p.ISR) != 3 {
		t.Fatalf("last partition after the batches: %+v", p)
	}
	if wantChanges := (len(entries) + 6) / 7; changes != wantChanges {
		t.Fatalf("%d changes published, want one per batch (%d)", changes, wantChanges)
	}
}

// A topic a result hands out is not changed in place by a later entry of
// the same batch.
func TestApplyBatchLeavesResultsAlone(t *testing.T) {
	h := reportsTopic(t, 3)
	report, _ := Encode(Entry{TimeMs: h.now, Cmd: ReportLeader{TopicID: topicID(1), Partition: 0, Leader: 1, LeaderEpoch: 1, Term: 1}})
	alter, _ := Encode(Entry{TimeMs: h.now, Cmd: AlterTopicConfig{TopicRef: TopicRef{Name: "t"}, Ops: []ConfigOp{{Name: "retention.ms", Value: "1000"}}}})
	report2, _ := Encode(Entry{TimeMs: h.now, Cmd: ReportLeader{TopicID: topicID(1), Partition: 1, Leader: 2, LeaderEpoch: 1, Term: 1}})
	i := h.index
	results := h.s.applyBatch([]raft.Entry{{Index: i + 1, Data: report}, {Index: i + 2, Data: alter}, {Index: i + 3, Data: report2}})
	for _, r := range results {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	altered := results[1].Topic
	if altered == nil {
		t.Fatal("AlterTopicConfig returned no topic")
	}
	if p := altered.Partitions[1]; p.LeaderTerm != 0 {
		t.Fatalf("the topic AlterTopicConfig returned was changed by the report after it: %+v", p)
	}
	if p, _ := h.s.View().Partition(topicID(1), 1); p.LeaderTerm != 1 || p.Leader != 2 {
		t.Fatalf("partition 1 after the batch: %+v", p)
	}
}

// BenchmarkApplyReports: a topic of 3,000 partitions led for the first
// time, its leaders' reports applied one at a time and in hashicorp's
// batches (64): the batches copy the topic once each.
func BenchmarkApplyReports(b *testing.B) {
	const n = 3000
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				h := reportsTopic(b, n)
				entries := leaderReports(b, n, h.index+1, h.now)
				b.StartTimer()
				for start := 0; start < len(entries); start += batch {
					h.s.applyBatch(entries[start:min(start+batch, len(entries))])
				}
			}
		})
	}
}
