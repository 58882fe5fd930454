package log

import (
	"os"
	"sync"
)

// PageCache bounds the page cache that a node's segment appends keep: it
// remembers the ranges whose writeback was started, in the order written,
// and once they pass its budget by a batch drops the oldest (DropCache)
// on a goroutine of its own, so that the node's newest budget bytes stay
// cached for the consumers that read them back and older pages are freed
// as new ones are written.
//
// Why: on a virtual machine whose balloon hands freed memory back to the
// host (virtio free-page reporting), writing into page-cache pages that
// must first be mapped again costs several times the copy itself. Over a
// sustained 10 GB produce run on one broker, 69% of the broker's CPU went
// to that copy (`copy_folio_from_iter_atomic`); dropping the pages behind
// lets the kernel hand the same pages back to the next appends instead
// (docs/architecture.md, "Segment page cache"). Consumers that fall
// further behind than the budget read from the disk, as the Raft log's
// readers already do.
//
// Pages brought in by reads are not counted; the kernel reclaims them as
// usual. A range still dirty or under writeback when its turn comes is
// left cached (posix_fadvise drops only clean pages). One PageCache
// serves every log of a node; a nil *PageCache leaves the segments'
// pages to the kernel, as Kafka does.
type PageCache struct {
	budget int64
	// batch is how far past the budget the appends go before the
	// oldest are dropped (dropBatch; tests use less).
	batch int64
	// drop is DropCache's system call; tests record the calls instead.
	drop func(f *os.File, off, n int64)

	mu     sync.Mutex
	ranges []cachedRange // a ring, oldest at head
	head   int
	count  int
	held   int64
	// dropped is the bytes of ranges handed to drop, for the metric.
	dropped int64
	// due are ranges past the budget, waiting for dropDue, which runs
	// while dropping.
	due      []cachedRange
	dropping bool
}

type cachedRange struct {
	f      *os.File
	off, n int64
}

// NewPageCache returns a PageCache keeping the newest budget bytes
// written by appends cached; budget must be positive.
func NewPageCache(budget int64) *PageCache {
	return &PageCache{budget: max(budget, 1), batch: dropBatch, drop: dropCache}
}

// written records that [off, off+n) of f was appended and its writeback
// started, and hands whatever this pushes past the budget to the
// dropping goroutine: posix_fadvise may wait for every CPU to drain its
// page lists (lru_add_drain_all), which the append, and the produce
// answered after it, should not.
func (pc *PageCache) written(f *os.File, off, n int64) {
	if n <= 0 {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.push(cachedRange{f: f, off: off, n: n})
	pc.held += n
	if pc.held <= pc.budget+pc.batch {
		return
	}
	for pc.held > pc.budget && pc.count > 0 {
		r := pc.pop()
		pc.held -= r.n
		pc.dropped += r.n
		pc.due = append(pc.due, r)
	}
	if len(pc.due) > 0 && !pc.dropping {
		pc.dropping = true
		go pc.dropDue()
	}
}

// dropDue drops the ranges written handed over, oldest first, and ends
// when none is left, so an idle node has no goroutine for it.
func (pc *PageCache) dropDue() {
	var batch []cachedRange
	for {
		pc.mu.Lock()
		batch, pc.due = pc.due, batch[:0]
		if len(batch) == 0 {
			pc.dropping = false
			pc.mu.Unlock()
			return
		}
		pc.mu.Unlock()
		for _, r := range mergeRanges(batch) {
			pc.drop(r.f, r.off, r.n)
		}
		clear(batch)
	}
}

// dropBatch is how far past the budget the appends go before the oldest
// are dropped, all at once, so that posix_fadvise (which may drain every
// CPU's page lists) is called once per 64 MiB rather than per megabyte.
// It did not bring a single partition's p99 at 20 MB/s back to what it
// is without a budget (docs/architecture.md, "Segment page cache"),
// which is why the budget is off by default.
const dropBatch = 64 << 20

// mergeRanges returns batch's ranges with each file's contiguous ones
// joined, in the order of each file's first range: one call per file and
// batch where a segment's appends came in one piece.
func mergeRanges(batch []cachedRange) []cachedRange {
	var out []cachedRange
	last := map[*os.File]int{}
	for _, r := range batch {
		if i, ok := last[r.f]; ok && out[i].off+out[i].n == r.off {
			out[i].n += r.n
			continue
		}
		last[r.f] = len(out)
		out = append(out, r)
	}
	return out
}

// PageCacheStats is what a PageCache counts.
type PageCacheStats struct {
	// Held is the bytes of appended ranges counted as cached.
	Held int64
	// Dropped is the bytes of appended ranges handed to be dropped from
	// the page cache since the PageCache was made.
	Dropped int64
}

// Stats returns what pc counts now.
func (pc *PageCache) Stats() PageCacheStats {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return PageCacheStats{Held: pc.held, Dropped: pc.dropped}
}

func (pc *PageCache) push(r cachedRange) {
	if pc.count == len(pc.ranges) {
		grown := make([]cachedRange, max(2*len(pc.ranges), 64))
		for i := range pc.count {
			grown[i] = pc.ranges[(pc.head+i)%len(pc.ranges)]
		}
		pc.ranges, pc.head = grown, 0
	}
	pc.ranges[(pc.head+pc.count)%len(pc.ranges)] = r
	pc.count++
}

func (pc *PageCache) pop() cachedRange {
	r := pc.ranges[pc.head]
	pc.ranges[pc.head] = cachedRange{}
	pc.head = (pc.head + 1) % len(pc.ranges)
	pc.count--
	return r
}
