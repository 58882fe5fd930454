package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Consumer-group committed offsets with kgo members: they survive graceful
// and SIGKILL restarts, and each group's offsets are its own.

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
