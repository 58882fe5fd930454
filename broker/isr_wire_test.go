package broker

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

type progressSeen struct {
	node   int32
	group  string
	offset int64
}

func decodeAll(t *testing.T, data []byte) ([]progressSeen, error) {
	t.Helper()
	var got []progressSeen
	err := decodeProgress(data, func(node int32, group string, offset int64) {
		got = append(got, progressSeen{node, group, offset})
	})
	return got, err
}

// TestProgressWireRoundTrip: binary reports carry every entry as sent,
// including offsets at the extremes and the longest group name.
func TestProgressWireRoundTrip(t *testing.T) {
	long := string(slices.Repeat([]byte("g"), maxProgressGroup))
	want := []progressSeen{{7, "orders-0", 0}, {7, "orders-1", 12345}, {7, long, math.MaxInt64}, {7, "x", -1}}
	data := appendProgressHeader(nil, 7)
	for _, e := range want {
		data = appendProgressEntry(data, e.group, e.offset)
	}
	if !isBinaryProgress(data) {
		t.Fatal("a binary report is not recognised as one")
	}
	got, err := decodeAll(t, data)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("decoded %v, %v; want %v", got, err, want)
	}
	if got, err := decodeAll(t, appendProgressHeader(nil, -3)); err != nil || len(got) != 0 {
		t.Fatalf("empty report: %v, %v", got, err)
	}

	// JSON from brokers of earlier versions is not taken for binary.
	old, _ := json.Marshal(progressReport{NodeID: 1, Replicas: []progressEntry{{Group: "a", End: 1}}})
	if isBinaryProgress(old) || isBinaryProgress(nil) {
		t.Fatal("JSON or nothing taken for a binary report")
	}
}

// TestProgressWireMalformed: truncated or corrupt reports are refused
// with an error, never a panic, and entries before the damage are the
// only ones delivered.
func TestProgressWireMalformed(t *testing.T) {
	good := appendProgressEntry(appendProgressEntry(appendProgressHeader(nil, 2), "a-0", 10), "a-1", 20)
	for cut := range len(good) {
		got, err := decodeAll(t, good[:cut])
		switch {
		case cut < 5 && !errors.Is(err, errProgressWire):
			t.Errorf("header cut at %d: %v", cut, err)
		case cut >= 5 && cut != 5 && cut != 5+1+3+1 && err == nil:
			t.Errorf("cut at %d decoded without error: %v", cut, got)
		case len(got) > 2:
			t.Errorf("cut at %d: %d entries", cut, len(got))
		}
	}
	tooLong := appendProgressEntry(appendProgressHeader(nil, 2), string(make([]byte, maxProgressGroup+1)), 1)
	if _, err := decodeAll(t, tooLong); !errors.Is(err, errProgressWire) {
		t.Errorf("over-long group name: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(64))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if len(b) > 0 && rng.IntN(2) == 0 {
			b[0] = progressWireV1
		}
		decodeAll(t, b) // must not panic
	}
}

// TestProgressFormats: a leader is sent binary reports once its JSON
// reply says it reads them, and JSON again once it stops saying so.
func TestProgressFormats(t *testing.T) {
	var f progressFormats
	if f.takesBinary("b1:9093") {
		t.Fatal("binary assumed before the leader said so")
	}
	f.set("b1:9093", true)
	if !f.takesBinary("b1:9093") || f.takesBinary("b2:9093") {
		t.Fatal("formats not kept per leader")
	}
	f.set("b1:9093", false)
	if f.takesBinary("b1:9093") {
		t.Fatal("binary kept after the leader stopped reading it")
	}
}
