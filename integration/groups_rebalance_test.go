package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Consumer-group rebalancing with kgo members: cooperative-sticky rebalances
// under load lose and duplicate nothing.

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
