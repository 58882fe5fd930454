package soak

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestSoakAcks(t *testing.T) {
	var a soakAcks
	for _, off := range []int64{10, 11, 12, 20, 21, 13} {
		a.add(off)
	}
	if a.total() != 6 || len(a.runs) != 3 {
		t.Fatalf("total %d, runs %v", a.total(), a.runs)
	}
	for _, tc := range []struct{ next, count, first int64 }{
		{0, 6, 10}, {12, 4, 12}, {14, 2, 20}, {21, 1, 21}, {22, 0, -1},
	} {
		if count, first := a.from(tc.next); count != tc.count || first != tc.first {
			t.Errorf("from %d: %d from %d, want %d from %d", tc.next, count, first, tc.count, tc.first)
		}
	}
}

// soakValue encodes a value as the soak's producers do.
func soakValue(sent time.Time, seq int64, size int) []byte {
	v := make([]byte, size)
	binary.BigEndian.PutUint64(v, uint64(sent.UnixNano()))
	binary.BigEndian.PutUint64(v[8:], uint64(seq))
	return v
}

func TestSoakDeliveryTake(t *testing.T) {
	at := time.Unix(1700000000, 0)
	d := newSoakDelivery(100)
	take := func(offset, seq int64) bool {
		t.Helper()
		sent, first := d.take(offset, soakValue(at, seq, 32))
		if first && !sent.Equal(at) {
			t.Fatalf("offset %d: send time %s", offset, sent)
		}
		return first
	}
	if take(99, 0) || d.preexisting != 1 {
		t.Fatal("a record before the base is not the soak's")
	}
	if !take(100, 0) || !take(101, 1) || take(100, 0) || d.redelivered != 1 {
		t.Fatalf("in order, then again: %+v", d)
	}
	if d.problem != "" {
		t.Fatalf("no problem yet: %s", d.problem)
	}
	// Sequence 2 never written (its producer gave up): a skip, not a
	// problem.
	if !take(102, 3) || d.seqSkips != 1 || d.problem != "" {
		t.Fatalf("sequence skip: %+v", d)
	}
	// Offset 103 skipped.
	if !take(104, 4) || d.gapRecords != 1 || !strings.Contains(d.problem, "offset 104 delivered where 103 was due") {
		t.Fatalf("gap: %+v", d)
	}
	// Sequence 4 again at a new offset: written twice.
	if !take(105, 4) || d.backwards != 1 {
		t.Fatalf("written twice: %+v", d)
	}
	if _, first := d.take(106, []byte("short")); first || d.foreign != 1 || d.next != 107 {
		t.Fatalf("foreign: %+v", d)
	}
	if d.delivered != 5 {
		t.Errorf("delivered %d", d.delivered)
	}
}

func testSoakTraffic() *soakTraffic {
	parts := []*soakPartition{{topic: "a", partition: 0, base: 0}, {topic: "a", partition: 1, base: 5}, {topic: "b", partition: 0, base: 0}}
	return newSoakTraffic(parts, []string{"g0", "g1"})
}

func TestSoakTrafficVerify(t *testing.T) {
	tr := testSoakTraffic()
	if tr.groups[0].delivery("a", 2) != nil || tr.groups[0].delivery("c", 0) != nil || tr.groups[0].delivery("a", -1) != nil {
		t.Fatal("unknown partitions have no delivery")
	}
	at := time.Now()
	// Partition a/1 starts at 5; b/0 gets an acknowledged record no group
	// reads, and one record nobody acknowledged.
	for off := int64(5); off < 8; off++ {
		tr.parts[1].acks.add(off)
	}
	tr.parts[2].acks.add(0)
	tr.parts[2].acks.add(1)
	for _, g := range tr.groups {
		for off := int64(5); off < 8; off++ {
			g.delivery("a", 1).take(off, soakValue(at, off-5, 16))
		}
	}
	tr.groups[0].delivery("b", 0).take(0, soakValue(at, 0, 16))
	tr.groups[0].delivery("b", 0).take(1, soakValue(at, 1, 16))
	tr.groups[0].delivery("b", 0).take(2, soakValue(at, 2, 16))
	tr.groups[1].delivery("b", 0).take(0, soakValue(at, 0, 16))
	if got := tr.behind(); got != 1 {
		t.Errorf("behind: %d", got)
	}
	c := tr.verify()
	if c.Verified || c.Acknowledged != 5 || c.Delivered != 10 || c.Missing != 1 || c.Unacknowledged != 1 || len(c.Problems) != 1 ||
		!strings.Contains(c.Problems[0], "group g1, b/0: 1 acknowledged records not received, from offset 1 (received up to 0)") {
		t.Errorf("%s", clitest.JSONOf(t, c))
	}
	tr.groups[1].delivery("b", 0).take(1, soakValue(at, 1, 16))
	if c := tr.verify(); !c.Verified || c.Missing != 0 || tr.behind() != 0 {
		t.Errorf("caught up: %s", clitest.JSONOf(t, c))
	}
	tr.unexpected.Add(2)
	if c := tr.verify(); c.Verified || c.Unexpected != 2 {
		t.Errorf("unexpected partitions: %s", clitest.JSONOf(t, c))
	}
}

func TestDealPartitions(t *testing.T) {
	parts := testSoakTraffic().parts
	shares := dealPartitions(parts, 2)
	if len(shares) != 2 || len(shares[0]) != 2 || len(shares[1]) != 1 || shares[0][1] != parts[2] {
		t.Errorf("shares: %v", shares)
	}
}

func TestSoakErrorsKeepsTheLatest(t *testing.T) {
	var e soakErrors
	e.add(errors.New("first"))
	e.add(errors.New("second"))
	if e.n.Load() != 2 || e.latest() != "second" {
		t.Errorf("%d, %q", e.n.Load(), e.latest())
	}
}
