package log

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// Readers run against a log that is being appended to, rolled and trimmed by
// retention; the race detector checks the locking and every read must
// return only whole, valid batches at the requested position.
func TestConcurrentReadersWhileAppending(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 4000
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 20000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()

	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				start, end := l.LogStartOffset(), l.EndOffset()
				for off := start; off < end; {
					b, err := l.Read(off, 3000, Obligatory, end)
					if errors.Is(err, ErrOffsetOutOfRange) {
						break // trimmed by retention meanwhile
					}
					if err != nil {
						errc <- err
						return
					}
					if b == nil {
						break
					}
					hs, err := ValidateBatches(b)
					if err != nil {
						errc <- err
						return
					}
					if hs[0].BaseOffset > off || hs[0].LastOffset() < off {
						errc <- errors.New("read returned the wrong batch")
						return
					}
					off = hs[len(hs)-1].LastOffset() + 1
				}
				l.OffsetForTimestamp(5)
				l.MaxTimestamp()
			}
		}()
	}
	for i := 0; i < 400; i++ {
		mustAppend(t, l, simpleBatch(t, 1+i%3, int64(i), 100))
		if i%50 == 0 {
			if _, err := l.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
			l.Sync()
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("retention never ran")
	}
}

// Readers run while the log is appended to, truncated and reset; batch
// sizes change between rounds, so bytes rewritten at a position no longer
// line up with the old batches. Every read must still return whole, valid,
// contiguous batches starting at the requested offset, or fail with
// ErrOffsetOutOfRange.
func TestConcurrentReadersWhileTruncatingAndResetting(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 3000
	cfg.IndexIntervalBytes = 200
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()

	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	okErr := func(err error) bool { return err == nil || errors.Is(err, ErrOffsetOutOfRange) }
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				start, end := l.LogStartOffset(), l.EndOffset()
				for off, n := start, 0; off < end && n < 1000; n++ {
					b, err := l.Read(off, 1500, Obligatory, end)
					if !okErr(err) {
						report(err)
						return
					}
					if err != nil || b == nil {
						break
					}
					hs, err := ValidateBatches(b)
					if err != nil {
						report(fmt.Errorf("read at %d: %w", off, err))
						return
					}
					if hs[0].BaseOffset > off || hs[0].LastOffset() < off {
						report(fmt.Errorf("read at %d returned batch %d-%d", off, hs[0].BaseOffset, hs[0].LastOffset()))
						return
					}
					for i := 1; i < len(hs); i++ {
						if hs[i].BaseOffset != hs[i-1].LastOffset()+1 {
							report(fmt.Errorf("read at %d: batch %d after %d-%d", off, hs[i].BaseOffset, hs[i-1].BaseOffset, hs[i-1].LastOffset()))
							return
						}
					}
					off = hs[len(hs)-1].LastOffset() + 1
				}
				next := int64(-1)
				err := l.Batches(start, func(h BatchHeader) bool {
					if next >= 0 && h.BaseOffset != next {
						report(fmt.Errorf("Batches: batch %d after end %d", h.BaseOffset, next))
						return false
					}
					next = h.LastOffset() + 1
					return true
				})
				if !okErr(err) {
					report(fmt.Errorf("Batches: %w", err))
					return
				}
				if _, _, _, err := l.OffsetForTimestamp(50); !okErr(err) {
					report(fmt.Errorf("OffsetForTimestamp: %w", err))
					return
				}
				if _, _, _, err := l.MaxTimestamp(); !okErr(err) {
					report(fmt.Errorf("MaxTimestamp: %w", err))
					return
				}
			}
		}()
	}

	rng := rand.New(rand.NewPCG(7, 8))
	var bases []int64 // base offsets of the batches since the last reset
	for i := 0; i < 400; i++ {
		res := mustAppend(t, l, simpleBatch(t, 1+rng.IntN(4), int64(i), 20+rng.IntN(300)))
		bases = append(bases, res.BaseOffset)
		switch {
		case i%97 == 96:
			to := l.EndOffset() / 2
			if rng.IntN(2) == 0 {
				to = l.EndOffset() + 10
			}
			if err := l.Reset(to); err != nil {
				t.Fatal(err)
			}
			bases = nil
		case i%9 == 8:
			j := rng.IntN(len(bases))
			if err := l.TruncateTo(bases[j]); err != nil {
				t.Fatalf("TruncateTo(%d): %v", bases[j], err)
			}
			bases = bases[:j]
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
