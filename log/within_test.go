package log

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestWithinMatchesRead is the property range coalescing rests on: for
// random earlier reads and random later ones (offsets, byte limits,
// obligatory or strict, watermarks), whenever Within finds the later read
// inside the earlier one's bytes, they are exactly what Read returns, and
// it finds a good share of them.
func TestWithinMatchesRead(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	cfg := testConfig(OSFS{})
	cfg.SegmentBytes = 64 << 10 // several segments: reads never cross one
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	for range 300 {
		mustAppend(t, l, simpleBatch(t, 1+rng.IntN(12), 1, 1+rng.IntN(900)))
	}
	end := l.EndOffset()
	modes := []ReadMode{Strict, Obligatory}
	randomRead := func(near int64) (offset int64, maxBytes int, mode ReadMode, upTo int64) {
		offset = min(max(near+int64(rng.IntN(200))-50, 0), end-1)
		maxBytes = 1 + rng.IntN(24<<10)
		mode = modes[rng.IntN(2)]
		upTo = offset + 1 + rng.Int64N(end-offset)
		return
	}

	const trials = 20000
	found, nonEmpty := 0, 0
	for range trials {
		o, m, md, u := randomRead(rng.Int64N(end))
		earlier, err := l.Read(o, m, md, u)
		if err != nil {
			t.Fatal(err)
		}
		if len(earlier) == 0 {
			continue
		}
		for range 8 {
			lo, lm, lmd, lu := randomRead(o)
			want, err := l.Read(lo, lm, lmd, lu)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) > 0 {
				nonEmpty++
			}
			start, stop, ok := Within(earlier, lo, lm, lmd, lu)
			if !ok {
				continue
			}
			found++
			if got := earlier[start:stop]; !bytes.Equal(got, want) {
				t.Fatalf("earlier Read(%d, %d, %v, %d) = %d bytes; Within(%d, %d, %v, %d) = [%d:%d], %d bytes, but Read returns %d bytes",
					o, m, md, u, len(earlier), lo, lm, lmd, lu, start, stop, len(got), len(want))
			}
		}
	}
	t.Logf("%d of %d later reads with data found within an earlier one", found, nonEmpty)
	if found < nonEmpty/50 {
		t.Fatalf("only %d of %d later reads found within an earlier one: the property is barely exercised", found, nonEmpty)
	}
}

func TestWithinRefusesWhatItCannotKnow(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig(OSFS{}))
	defer l.Close()
	for range 4 {
		mustAppend(t, l, simpleBatch(t, 10, 1, 100)) // offsets 0-9, 10-19, 20-29, 30-39
	}
	size := len(simpleBatch(t, 10, 1, 100))
	middle, err := l.Read(10, 2*size, Strict, 40) // batches 10-19 and 20-29
	if err != nil || len(middle) != 2*size {
		t.Fatalf("read %d bytes, %v", len(middle), err)
	}
	for _, tt := range []struct {
		name     string
		offset   int64
		maxBytes int
		mode     ReadMode
		upTo     int64
		want     int // bytes from the start of records; -1: not within
	}{
		{"before the first batch: an earlier batch may hold it", 5, size, Strict, 40, -1},
		{"just before the first batch", 9, size, Strict, 40, -1},
		{"past the last batch", 30, size, Strict, 40, -1},
		{"one batch, ends inside", 12, size, Strict, 40, size},
		{"runs past the end, and the next batch would be kept", 12, 3 * size, Strict, 40, -1},
		{"runs to the end, and the next batch starts at the watermark", 12, 3 * size, Strict, 30, 2 * size},
		{"first batch too big for a strict read", 12, size - 1, Strict, 40, -1},
		{"first batch whole for an obligatory read", 12, size - 1, Obligatory, 40, size},
		{"at the watermark", 30, size, Strict, 30, -1},
	} {
		start, end, ok := Within(middle, tt.offset, tt.maxBytes, tt.mode, tt.upTo)
		switch {
		case tt.want < 0 && ok:
			t.Errorf("%s: found [%d:%d], want not within", tt.name, start, end)
		case tt.want >= 0 && (!ok || start != 0 || end != tt.want):
			t.Errorf("%s: [%d:%d] %v, want [0:%d]", tt.name, start, end, ok, tt.want)
		}
	}
	if _, _, ok := Within(nil, 0, 1<<20, Obligatory, 40); ok {
		t.Error("found within nothing")
	}
}
