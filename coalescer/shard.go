package coalescer

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// shard owns the cache index of the partitions that hash to it.
type shard struct {
	free       func([]byte)
	within     func(data []byte, key Key, upTo int64) (start, end int, ok bool)
	retain     *retainer // nil: none
	indexBytes int
	counters   counters

	mu sync.Mutex
	// index is nil while coalescing is disabled.
	index *index
	// recent holds each partition's latest results, for range hits; nil
	// while disabled or without Options.Within.
	recent recentByPartition
	// flights counts the flights created so far; see flight.seq.
	flights uint64
	// clock orders slot uses for eviction.
	clock uint64
}

func newShard(opts Options, retain *retainer) *shard {
	return &shard{free: opts.Free, within: opts.Within, retain: retain, indexBytes: opts.IndexBytes}
}

// enable installs a fresh index unless one is already in place. It is
// allocated outside the mutex so that readers never wait on the zeroing of
// half a megabyte.
func (s *shard) enable() {
	s.mu.Lock()
	present := s.index != nil
	s.mu.Unlock()
	if present {
		return
	}
	x := newIndex(s.indexBytes)
	s.mu.Lock()
	if s.index == nil {
		s.index = x
		if s.within != nil {
			s.recent = make(recentByPartition)
		}
	}
	s.mu.Unlock()
}

// disable drops the index. Flights registered in it keep running: complete
// notices that their index is gone and only delivers.
func (s *shard) disable() {
	s.mu.Lock()
	s.index, s.recent = nil, nil
	s.mu.Unlock()
}

// read serves key from the index, taking a ready result, joining a read in
// flight or starting one. It tries again when the outcome was not meant
// for this caller: a stale result of a read that started before the caller
// arrived, or the failure of an initiator whose context ended.
func (s *shard) read(ctx context.Context, key Key, current int64, read ReadFunc) (*Result, error) {
	var arrived uint64
	triedRange := false
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		x := s.index
		if x == nil {
			s.mu.Unlock()
			return readDirect(ctx, read, s.free)
		}
		if attempt == 0 {
			arrived = s.flights
		}
		match, victim := x.probe(&key)
		if match < 0 && !triedRange && s.recent != nil {
			// No result of this key: perhaps part of a recent one of its
			// partition is exactly what this read would return.
			triedRange = true
			var held [recentWays]*Result
			if n := s.recent.acquire(key.partition(), &held); n > 0 {
				s.mu.Unlock()
				if r := s.rangeHit(held[:n], &key, current); r != nil {
					return r, nil
				}
				continue
			}
		}
		var f *flight
		joined := false
		switch {
		case match >= 0 && x.slots[match].flight != nil:
			joined = true
			f = x.slots[match].flight
			f.waiters++
			s.mu.Unlock()
			s.counters.inflightHits.Add(1)
		case match >= 0:
			sl := &x.slots[match]
			if r := sl.result; current <= r.Watermark && r.tryAcquire() {
				s.clock++
				sl.used = s.clock
				s.mu.Unlock()
				s.counters.readyHits.Add(1)
				s.counters.sharedBytes.Add(uint64(len(r.Data)))
				return r, nil
			}
			// Stale, or its last holder is gone: read again in place.
			f = s.newFlight(ctx, &key, x, match)
			sl.result, sl.flight = nil, f
			s.mu.Unlock()
			s.counters.reinsertions.Add(1)
			s.lead(f, read)
		default:
			if victim >= 0 {
				f = s.newFlight(ctx, &key, x, victim)
				x.slots[victim] = slot{key: key, flight: f}
			} else {
				// Every way is in flight: read without caching.
				f = s.newFlight(ctx, &key, nil, -1)
			}
			s.mu.Unlock()
			s.counters.insertions.Add(1)
			s.lead(f, read)
		}
		res, err, retry := s.await(ctx, f, current, arrived)
		if !retry {
			if joined && res != nil {
				s.counters.sharedBytes.Add(uint64(len(res.Data)))
			}
			return res, err
		}
	}
}

// newFlight creates a flight with its initiator as the only waiter. The
// caller holds s.mu.
func (s *shard) newFlight(ctx context.Context, key *Key, x *index, pos int) *flight {
	s.flights++
	return &flight{
		ctx: ctx, key: *key, seq: s.flights, idx: x, pos: pos,
		done: make(chan struct{}), waiters: 1,
	}
}

// rangeHit looks for key's read inside the results held (one reference
// each, which it gives back), newest first, and returns a view of the
// first that has it.
func (s *shard) rangeHit(held []*Result, key *Key, current int64) *Result {
	var hit *Result
	for i := len(held) - 1; i >= 0; i-- {
		r := held[i]
		if hit == nil {
			if start, end, ok := s.within(r.Data, *key, current); ok {
				hit = newView(r, r.Data[start:end:end], current)
				continue
			}
		}
		r.Release()
	}
	if hit != nil {
		s.counters.readyHits.Add(1)
		s.counters.rangeHits.Add(1)
		s.counters.sharedBytes.Add(uint64(len(hit.Data)))
	}
	return hit
}

// lead runs f's read on the goroutine of the fetch that started it, which
// would have read the same bytes itself with coalescing off: a miss costs
// the index lookup and nothing else, no hand-off to another goroutine and
// back. read is not kept past the call, so the caller's closure need not
// be allocated: a hit costs no allocation for it either. A read whose
// initiator is already gone is not made: the bytes would be wasted on it,
// and its waiters retry with their own contexts.
func (s *shard) lead(f *flight, read ReadFunc) {
	if s.retain == nil {
		// Yield once before reading. The fetches one append wakes become
		// runnable together, but this one would otherwise read, answer
		// and release before the others run: each would then find the
		// result gone and read again. One yield lets them join this
		// flight first; with nothing else runnable it costs a few
		// hundred nanoseconds. A retained result outlives this fetch, so
		// then the others find it ready instead, without waiting on it.
		runtime.Gosched()
	}
	if err := f.ctx.Err(); err != nil {
		s.complete(f, nil, 0, err)
		return
	}
	start := time.Now()
	data, watermark, err := f.call(read)
	s.counters.reads.Add(1)
	s.counters.readBytes.Add(uint64(len(data)))
	s.counters.readNanos.Add(uint64(time.Since(start)))
	s.complete(f, data, watermark, err)
}

// complete records f's outcome, updates its slot and wakes its waiters.
// The result starts with one reference per waiter still waiting, counted
// under the mutex that waiters join and leave under, so the count is exact.
func (s *shard) complete(f *flight, data []byte, watermark int64, err error) {
	cancelled := err != nil && f.initiatorCancelled(err)
	s.mu.Lock()
	var res *Result
	pin := false
	if err == nil && f.waiters > 0 {
		res = &f.result
		// A result worth finding later gets one more reference, the
		// retainer's, while coalescing is on.
		pin = len(data) > 0 && s.retain != nil && s.index != nil
		refs := f.waiters
		if pin {
			refs++
		}
		res.init(data, watermark, refs, s.free)
	}
	if res != nil && len(data) > 0 && s.recent != nil {
		s.recent.remember(f.key.partition(), res)
	}
	if f.idx != nil && f.idx == s.index && f.idx.slots[f.pos].flight == f {
		sl := &f.idx.slots[f.pos]
		if res != nil && len(data) > 0 {
			s.clock++
			sl.flight, sl.result, sl.used = nil, res, s.clock
		} else {
			// Errors and empty results are not worth keeping.
			*sl = slot{}
		}
	}
	f.res, f.err, f.cancelled, f.completed = res, err, cancelled, true
	// A ready slot keeps the flight (its result) reachable: it must not
	// keep the initiating fetch's context too.
	f.ctx = nil
	s.mu.Unlock()
	close(f.done)
	if pin {
		s.retain.keep(res)
	}
	if res == nil {
		discard(data, s.free)
	}
}

// await waits for f's outcome. It returns retry when the outcome is not
// for this caller: a stale result of a read already in flight when the
// caller arrived (the caller's reference is released), or an initiator's
// cancellation while the caller's own context is alive.
func (s *shard) await(ctx context.Context, f *flight, current int64, arrived uint64) (res *Result, err error, retry bool) {
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, s.abandon(ctx, f), false
	}
	if f.err != nil {
		if !f.cancelled {
			return nil, f.err, false
		}
		if err := ctx.Err(); err != nil {
			return nil, err, false
		}
		return nil, nil, true
	}
	if f.seq <= arrived && current > f.res.Watermark {
		f.res.Release()
		return nil, nil, true
	}
	return f.res, nil, false
}

// abandon withdraws a waiter whose context ended. Before completion it
// just stops being counted; after, it gives back the reference completion
// counted for it.
func (s *shard) abandon(ctx context.Context, f *flight) error {
	s.mu.Lock()
	completed := f.completed
	if !completed {
		f.waiters--
	}
	s.mu.Unlock()
	if completed && f.res != nil {
		f.res.Release()
	}
	return ctx.Err()
}
