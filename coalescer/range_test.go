package coalescer

import (
	"context"
	"testing"
)

// digits is a toy log for range hits: a read at offset o returns the
// digits o, o+1, ... (one byte per offset, MaxBytes of them), and a read
// lies within earlier data when all its bytes are there.
func digits(offset int64, n int32) ReadFunc {
	return func(context.Context) ([]byte, int64, error) {
		b := make([]byte, 0, n)
		for i := int64(0); i < int64(n); i++ {
			b = append(b, byte('0'+offset+i))
		}
		return b, 100, nil
	}
}

func digitsWithin(data []byte, key Key, _ int64) (start, end int, ok bool) {
	if len(data) == 0 {
		return 0, 0, false
	}
	start = int(key.Offset - int64(data[0]-'0'))
	end = start + int(key.MaxBytes)
	if start < 0 || end > len(data) {
		return 0, 0, false
	}
	return start, end, true
}

func rangeKey(offset int64, maxBytes int32) Key {
	k := baseKey()
	k.Offset, k.MaxBytes = offset, maxBytes
	return k
}

func TestRangeHitAnswersWithPartOfAHeldResult(t *testing.T) {
	freed := &freeLog{}
	c := newEnabled(t, Options{Shards: 1, Within: digitsWithin, Free: freed.free})
	whole := mustRead(t, c, rangeKey(0, 10), 0, digits(0, 10))
	part := mustRead(t, c, rangeKey(3, 4), 0, func(context.Context) ([]byte, int64, error) {
		t.Error("a read was made for bytes a held result has")
		return nil, 0, nil
	})
	if string(part.Data) != "3456" {
		t.Fatalf("range hit data %q, want 3456", part.Data)
	}
	st := c.Stats()[0]
	if st.RangeHits != 1 || st.ReadyHits != 1 || st.Reads != 1 || st.SharedBytes != 4 {
		t.Fatalf("stats %+v: want one range hit (a ready hit of 4 shared bytes) and the one read", st)
	}
	// The view keeps the whole result alive: its buffer goes back once,
	// after both are released, whichever goes first.
	whole.Release()
	if freed.count() != 0 {
		t.Fatal("the result was freed while a view of it was held")
	}
	if string(part.Data) != "3456" {
		t.Fatalf("the view changed: %q", part.Data)
	}
	part.Release()
	if freed.count() != 1 {
		t.Fatalf("Free called %d times, want once", freed.count())
	}
}

func TestRangeHitNeedsAHolderTheIsolationAndCoverage(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1, Within: digitsWithin})
	r := mustRead(t, c, rangeKey(0, 10), 0, digits(0, 10))

	committed := rangeKey(3, 4)
	committed.Isolation = 1
	other := &reader{payload: "x"}
	mustRead(t, c, committed, 0, other.read).Release()
	past := rangeKey(8, 4) // runs past the held bytes
	mustRead(t, c, past, 0, other.read).Release()
	if other.calls.Load() != 2 || c.Stats()[0].RangeHits != 0 {
		t.Fatalf("reads %d, range hits %d: another isolation level or bytes past the result must be read", other.calls.Load(), c.Stats()[0].RangeHits)
	}

	r.Release() // nobody holds it now
	mustRead(t, c, rangeKey(3, 4), 0, other.read).Release()
	if other.calls.Load() != 3 || c.Stats()[0].RangeHits != 0 {
		t.Fatal("a released result answered a range hit")
	}
}

func TestRangeHitsOffWithoutWithinOrWhenDisabled(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1})
	r := mustRead(t, c, rangeKey(0, 10), 0, digits(0, 10))
	defer r.Release()
	other := &reader{payload: "x"}
	mustRead(t, c, rangeKey(3, 4), 0, other.read).Release()
	if other.calls.Load() != 1 {
		t.Fatal("a range hit without Options.Within")
	}

	d := newEnabled(t, Options{Shards: 1, Within: digitsWithin})
	held := mustRead(t, d, rangeKey(0, 10), 0, digits(0, 10))
	defer held.Release()
	d.SetEnabled(false)
	d.SetEnabled(true)
	mustRead(t, d, rangeKey(3, 4), 0, other.read).Release()
	if other.calls.Load() != 2 {
		t.Fatal("a result from before a switch off and on answered a range hit")
	}
}
