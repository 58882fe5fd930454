package broker

import (
	"slices"
	"sync"
	"testing"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

// ent is an epoch entry literal for the tables.
func ent(epoch int32, start int64) epochEntry { return epochEntry{epoch, start} }

func cacheOf(entries ...epochEntry) *epochCache {
	return &epochCache{entries: slices.Clone(entries)}
}

func checkEntries(t *testing.T, c *epochCache, want []epochEntry) {
	t.Helper()
	c.mu.Lock()
	got := slices.Clone(c.entries)
	c.mu.Unlock()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
}

func TestEpochCacheObserve(t *testing.T) {
	type obs struct {
		epoch int32
		start int64
	}
	for _, tc := range []struct {
		name string
		obs  []obs
		want []epochEntry
	}{
		{"empty", nil, nil},
		{"first batch", []obs{{0, 0}}, []epochEntry{ent(0, 0)}},
		{"first batch after a log start", []obs{{2, 7}}, []epochEntry{ent(2, 7)}},
		{"same epoch adds nothing", []obs{{1, 0}, {1, 3}, {1, 9}}, []epochEntry{ent(1, 0)}},
		{"each new epoch starts an entry", []obs{{1, 0}, {1, 4}, {3, 10}, {3, 12}, {4, 20}},
			[]epochEntry{ent(1, 0), ent(3, 10), ent(4, 20)}},
		{"older epoch adds nothing", []obs{{3, 0}, {2, 5}, {3, 6}}, []epochEntry{ent(3, 0)}},
		{"negative epochs are ignored", []obs{{-1, 0}, {-1, 1}, {2, 2}, {-1, 3}}, []epochEntry{ent(2, 2)}},
		{"negative offset is ignored", []obs{{1, -1}}, nil},
		// Kafka's assign keeps start offsets increasing: a newer epoch
		// at an offset an entry already claims replaces it.
		{"stale entry at the same offset", []obs{{1, 0}, {2, 5}, {3, 5}}, []epochEntry{ent(1, 0), ent(3, 5)}},
		{"stale entry past the offset", []obs{{1, 0}, {2, 5}, {3, 8}, {4, 6}}, []epochEntry{ent(1, 0), ent(2, 5), ent(4, 6)}},
		{"stale entries at and past the offset", []obs{{1, 0}, {2, 5}, {3, 8}, {4, 5}}, []epochEntry{ent(1, 0), ent(4, 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c epochCache
			for _, o := range tc.obs {
				c.observe(o.epoch, o.start)
			}
			checkEntries(t, &c, tc.want)
			wantLatest := int32(-1)
			if len(tc.want) > 0 {
				wantLatest = tc.want[len(tc.want)-1].epoch
			}
			if got := c.latest(); got != wantLatest {
				t.Fatalf("latest %d, want %d", got, wantLatest)
			}
		})
	}
}

// TestEpochCacheEndOffsetFor follows LeaderEpochFileCache.endOffsetFor
// case by case.
func TestEpochCacheEndOffsetFor(t *testing.T) {
	const logEnd = 30
	history := []epochEntry{ent(1, 0), ent(3, 10), ent(4, 20)}
	for _, tc := range []struct {
		name      string
		entries   []epochEntry
		requested int32
		epoch     int32
		end       int64
	}{
		{"undefined epoch", history, -1, -1, -1},
		{"latest epoch: log end", history, 4, 4, logEnd},
		{"newer than every epoch", history, 5, -1, -1},
		{"much newer", history, 1 << 30, -1, -1},
		{"known epoch: start of the next", history, 3, 3, 20},
		{"first epoch", history, 1, 1, 10},
		{"gap: largest epoch below", history, 2, 1, 10},
		{"older than every epoch: first start", history, 0, 0, 0},
		{"other negative epochs are only older", history, -5, -5, 0},
		{"older than a first epoch that starts late", []epochEntry{ent(5, 11)}, 4, 4, 11},
		{"single epoch, latest", []epochEntry{ent(5, 11)}, 5, 5, logEnd},
		{"empty cache", nil, 0, -1, -1},
		{"empty cache, positive epoch", nil, 3, -1, -1},
		{"empty cache, undefined epoch", nil, -1, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			epoch, end := cacheOf(tc.entries...).endOffsetFor(tc.requested, logEnd)
			if epoch != tc.epoch || end != tc.end {
				t.Fatalf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.requested, epoch, end, tc.epoch, tc.end)
			}
		})
	}
}

// TestEpochCacheEpochAt follows LeaderEpochFileCache.epochForOffset.
func TestEpochCacheEpochAt(t *testing.T) {
	c := cacheOf(ent(1, 5), ent(3, 10), ent(4, 20))
	for _, tc := range []struct {
		offset int64
		want   int32
	}{{0, -1}, {4, -1}, {5, 1}, {9, 1}, {10, 3}, {19, 3}, {20, 4}, {1000, 4}} {
		if got := c.epochAt(tc.offset); got != tc.want {
			t.Errorf("epochAt(%d) = %d, want %d", tc.offset, got, tc.want)
		}
	}
	var empty epochCache
	if got := empty.epochAt(0); got != -1 {
		t.Errorf("empty epochAt(0) = %d, want -1", got)
	}
}

func TestEpochCacheTruncateFrom(t *testing.T) {
	history := []epochEntry{ent(1, 0), ent(3, 10), ent(4, 20)}
	for _, tc := range []struct {
		name   string
		offset int64
		want   []epochEntry
	}{
		{"past every start", 25, history},
		{"inside the latest epoch", 21, history},
		{"at the latest start", 20, []epochEntry{ent(1, 0), ent(3, 10)}},
		{"inside an older epoch", 15, []epochEntry{ent(1, 0), ent(3, 10)}},
		{"just after a start", 11, []epochEntry{ent(1, 0), ent(3, 10)}},
		{"at a middle start", 10, []epochEntry{ent(1, 0)}},
		{"to empty", 0, nil},
		{"negative: no change", -1, history},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cacheOf(history...)
			c.truncateFrom(tc.offset)
			checkEntries(t, c, tc.want)
		})
	}
}

// TestEpochCacheTruncateBefore follows Kafka's truncateFromStart.
func TestEpochCacheTruncateBefore(t *testing.T) {
	history := []epochEntry{ent(2, 6), ent(3, 8), ent(4, 11)}
	for _, tc := range []struct {
		name   string
		offset int64
		want   []epochEntry
	}{
		{"before every start", 5, history},
		{"at the first start", 6, history},
		{"inside the first epoch", 7, []epochEntry{ent(2, 7), ent(3, 8), ent(4, 11)}},
		{"at a later start", 8, []epochEntry{ent(3, 8), ent(4, 11)}},
		{"inside a later epoch", 9, []epochEntry{ent(3, 9), ent(4, 11)}},
		{"at the latest start", 11, []epochEntry{ent(4, 11)}},
		{"past every start", 13, []epochEntry{ent(4, 13)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cacheOf(history...)
			c.truncateBefore(tc.offset)
			checkEntries(t, c, tc.want)
		})
	}
	var c epochCache
	c.truncateBefore(10)
	checkEntries(t, &c, nil)
}

// TestEpochCacheTruncationAnswers: after truncation the answers follow
// the remaining history, as a consumer that read the lost suffix needs.
func TestEpochCacheTruncationAnswers(t *testing.T) {
	var c epochCache
	c.observe(1, 0)
	c.observe(2, 10)
	c.observe(3, 20)
	// The epoch 3 suffix is lost; epoch 4 then writes from 20 again.
	c.truncateFrom(20)
	if got := c.latest(); got != 2 {
		t.Fatalf("latest after truncateFrom %d, want 2", got)
	}
	c.observe(4, 20)
	// A consumer that read epoch 3 learns epoch 2 ended at 20.
	if epoch, end := c.endOffsetFor(3, 25); epoch != 2 || end != 20 {
		t.Fatalf("endOffsetFor(3) = (%d, %d), want (2, 20)", epoch, end)
	}
	c.truncateBefore(15)
	if epoch, end := c.endOffsetFor(1, 25); epoch != 1 || end != 15 {
		t.Fatalf("endOffsetFor(1) after truncateBefore = (%d, %d), want (1, 15)", epoch, end)
	}
	if epoch, end := c.endOffsetFor(2, 25); epoch != 2 || end != 20 {
		t.Fatalf("endOffsetFor(2) after truncateBefore = (%d, %d), want (2, 20)", epoch, end)
	}
}

func openEpochLog(t *testing.T, cfg log.Config) *log.Log {
	t.Helper()
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendEpochBatch(t *testing.T, l *log.Log, epoch int32, records int) {
	t.Helper()
	if _, err := l.Append(logtest.Batch{Records: records, ValueSize: 100}.Encode(), log.AppendOptions{LeaderEpoch: epoch}); err != nil {
		t.Fatal(err)
	}
}

// TestEpochCacheRebuild replays a real log across several segments.
func TestEpochCacheRebuild(t *testing.T) {
	// Small segments: the epochs are read across segment boundaries.
	l := openEpochLog(t, log.Config{SegmentBytes: 1024})
	var c epochCache
	if err := c.rebuild(l); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, &c, nil)

	// offsets: epoch -1 [0,2), epoch 1 [2,8), epoch 3 [8,11),
	// epoch 2 (stale, ignored) [11,12), epoch 5 [12,14)
	appendEpochBatch(t, l, -1, 2)
	appendEpochBatch(t, l, 1, 3)
	appendEpochBatch(t, l, 1, 3)
	appendEpochBatch(t, l, 3, 3)
	appendEpochBatch(t, l, 2, 1)
	appendEpochBatch(t, l, 5, 2)
	if l.NumSegments() < 2 {
		t.Fatalf("log has %d segments, want several", l.NumSegments())
	}
	want := []epochEntry{ent(1, 2), ent(3, 8), ent(5, 12)}
	c.observe(9, 100) // replaced, not merged
	if err := c.rebuild(l); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, &c, want)

	// The same entries as observing each append.
	var live epochCache
	for _, b := range []struct {
		epoch int32
		base  int64
	}{{-1, 0}, {1, 2}, {1, 5}, {3, 8}, {2, 11}, {5, 12}} {
		live.observe(b.epoch, b.base)
	}
	checkEntries(t, &live, want)

	p := &Partition{log: l}
	if err := p.epochs.rebuild(l); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		requested, epoch int32
		end              int64
	}{{5, 5, 14}, {4, 3, 12}, {3, 3, 12}, {2, 1, 8}, {1, 1, 8}, {0, 0, 2}, {6, -1, -1}, {-1, -1, -1}} {
		if epoch, end := p.EndOffsetForEpoch(tc.requested); epoch != tc.epoch || end != tc.end {
			t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tc.requested, epoch, end, tc.epoch, tc.end)
		}
	}
}

// TestEpochCacheRebuildAfterDeleteRecords: a log start inside a batch
// clamps the first epoch to it, as Kafka's truncateFromStart does.
func TestEpochCacheRebuildAfterDeleteRecords(t *testing.T) {
	l := openEpochLog(t, log.Config{})
	appendEpochBatch(t, l, 1, 4) // [0,4)
	appendEpochBatch(t, l, 2, 4) // [4,8)
	appendEpochBatch(t, l, 3, 4) // [8,12)
	for _, tc := range []struct {
		start int64
		want  []epochEntry
	}{
		{2, []epochEntry{ent(1, 2), ent(2, 4), ent(3, 8)}},
		{4, []epochEntry{ent(2, 4), ent(3, 8)}},
		{6, []epochEntry{ent(2, 6), ent(3, 8)}},
		{11, []epochEntry{ent(3, 11)}},
	} {
		if err := l.DeleteRecordsBefore(tc.start); err != nil {
			t.Fatal(err)
		}
		var c epochCache
		if err := c.rebuild(l); err != nil {
			t.Fatal(err)
		}
		// A live cache told of the move agrees with the rebuilt one.
		live := cacheOf(ent(1, 0), ent(2, 4), ent(3, 8))
		live.truncateBefore(tc.start)
		checkEntries(t, &c, tc.want)
		checkEntries(t, live, tc.want)
	}
	// With every batch gone the log holds no epoch at all; a live cache
	// keeps the latest, as Kafka's does. (The leader's epoch comes back
	// with observe(epoch, log end) when it is elected, see observe.)
	if err := l.DeleteRecordsBefore(12); err != nil {
		t.Fatal(err)
	}
	var c epochCache
	if err := c.rebuild(l); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, &c, nil)
	live := cacheOf(ent(1, 0), ent(2, 4), ent(3, 8))
	live.truncateBefore(12)
	checkEntries(t, live, []epochEntry{ent(3, 12)})
}

// TestEpochCacheNewLeader: a leader records its epoch at the log end
// when elected, before it writes anything (Kafka's Partition.makeLeader),
// so a consumer still on the old epoch learns where it ended.
func TestEpochCacheNewLeader(t *testing.T) {
	var c epochCache
	c.observe(1, 0)
	c.observe(2, 10) // elected at log end 10
	if epoch, end := c.endOffsetFor(1, 10); epoch != 1 || end != 10 {
		t.Fatalf("endOffsetFor(1) = (%d, %d), want (1, 10)", epoch, end)
	}
	if epoch, end := c.endOffsetFor(2, 10); epoch != 2 || end != 10 {
		t.Fatalf("endOffsetFor(2) = (%d, %d), want (2, 10)", epoch, end)
	}
	c.observe(2, 10) // its first batch: nothing new
	c.observe(3, 10) // re-elected before writing: epoch 2 never wrote
	checkEntries(t, &c, []epochEntry{ent(1, 0), ent(3, 10)})
}

// TestEpochCacheConcurrent runs appends, truncations and lookups together
// for the race detector.
func TestEpochCacheConcurrent(t *testing.T) {
	var c epochCache
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 2000 {
			c.observe(int32(i/10), int64(i))
			if i%500 == 499 {
				c.truncateBefore(int64(i - 100))
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for i := range 2000 {
				epoch, end := c.endOffsetFor(int32(i/10), 2000)
				if epoch > int32(i/10) || (epoch == -1) != (end == -1) {
					t.Errorf("endOffsetFor(%d) = (%d, %d)", i/10, epoch, end)
					return
				}
				c.latest()
			}
		})
	}
	wg.Wait()
	if got := c.latest(); got != 199 {
		t.Fatalf("latest %d, want 199", got)
	}
}
