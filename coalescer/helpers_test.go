package coalescer

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// testTimeout bounds every wait in the tests, so a bug fails a test
// instead of hanging it.
const testTimeout = 10 * time.Second

func newEnabled(t *testing.T, opts Options) *Coalescer {
	t.Helper()
	opts.Enabled = true
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func topic(b byte) [16]byte {
	var id [16]byte
	id[0], id[15] = b, b
	return id
}

func baseKey() Key {
	return Key{TopicID: topic(1), Partition: 3, Offset: 100, MaxBytes: 1 << 20, Obligatory: true}
}

// reader is a scripted ReadFunc that counts its calls and can hold them.
type reader struct {
	payload   string
	watermark int64
	err       error
	empty     bool
	// hold, when set, blocks every read until it is closed; a read whose
	// context ends first returns the context's error, as a real one would.
	hold  chan struct{}
	calls atomic.Int32
}

func (r *reader) read(ctx context.Context) ([]byte, int64, error) {
	n := r.calls.Add(1)
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(testTimeout):
			return nil, 0, context.DeadlineExceeded
		}
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	if r.empty {
		return make([]byte, 0, 8), r.watermark, nil
	}
	return []byte(r.payload + "#" + strconv.Itoa(int(n))), r.watermark, nil
}

type outcome struct {
	res *Result
	err error
	// took is how long Read blocked.
	took time.Duration
}

func readAsync(c *Coalescer, ctx context.Context, key Key, current int64, read ReadFunc) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		start := time.Now()
		res, err := c.Read(ctx, key, current, read)
		ch <- outcome{res, err, time.Since(start)}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for a Read to return")
		return outcome{}
	}
}

func mustRead(t *testing.T, c *Coalescer, key Key, current int64, read ReadFunc) *Result {
	t.Helper()
	res, err := c.Read(context.Background(), key, current, read)
	if err != nil {
		t.Fatalf("Read(%+v): %v", key, err)
	}
	return res
}

func statsOf(c *Coalescer, key Key) ShardStats { return lookups(c.Stats()[c.ShardOf(key)]) }

// lookups keeps only the lookup counters of s, which tests compare whole.
func lookups(s ShardStats) ShardStats {
	return ShardStats{Insertions: s.Insertions, Reinsertions: s.Reinsertions, ReadyHits: s.ReadyHits, InflightHits: s.InflightHits}
}

// freeLog records Options.Free calls, to check each buffer comes back
// exactly once.
type freeLog struct {
	mu    sync.Mutex
	freed map[*byte]int
	calls int
}

func (f *freeLog) free(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.freed == nil {
		f.freed = make(map[*byte]int)
	}
	f.freed[unsafe.SliceData(b)]++
	f.calls++
}

func (f *freeLog) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// timesFreed reports how often the buffer backing b was freed.
func (f *freeLog) timesFreed(b []byte) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.freed[unsafe.SliceData(b)]
}

func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

func waitGroup(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for goroutines")
	}
}
