package log

import (
	"errors"
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
