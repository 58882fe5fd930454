package broker

import (
	"sync"
	"sync/atomic"

	"github.com/weir-broker/weir/raft"
)

// acks=1: answered once the leader's own Raft log holds the batch on disk.
//
// Kafka answers acks=1 once the leader appended the batch to its log,
// before any follower has it. weir's leader appends to the partition's
// log only when the batch is committed, so what acks=1 waits for here is
// the leader's Raft log: the batch is answered once it is fsynced there,
// before a majority has it. Its offsets are not known then — the apply
// assigns them from the log end — so the leader predicts them as its
// Raft log stores entries (leaderWrites, a raft.LogObserver): a batch
// whose effect on the offsets is certain takes the next ones. The
// prediction is exact because the apply is deterministic and sees the
// same entries in the same order:
//
//   - only batches without a producer id are predicted (acks=1 producers
//     are not idempotent: Kafka clients require acks=all for
//     idempotence), and their CRC is checked before they are proposed,
//     so their apply appends exactly lastOffsetDelta+1 offsets;
//   - the prediction starts from the log end at an entry every command
//     before which is applied, and runs on while each next entry is one
//     of those batches or carries no command (Raft's no-ops and
//     configurations); any other entry (an idempotent or transactional
//     batch, a marker, DeleteRecords, another leader's entry) stops it,
//     and it starts again once the log is applied up to it;
//   - a gap in the indexes or a truncation of the log stops it too.
//
// A batch not predicted waits for its commit as with acks=all (that is
// stronger). A batch answered early may still be lost, exactly as with
// Kafka's acks=1: when the leader loses leadership before a majority has
// it, the new leader's log replaces it, and its offsets go to other
// records. Consumers see it only once it is committed (the high
// watermark), as in Kafka.
type leaderWrites struct {
	// applied reads the partition's applied Raft index and log end
	// together (under appendMu); logStart its log start offset.
	applied  func() (index uint64, end int64)
	logStart func() int64

	// lastCommand is the index of the last command entry stored here
	// since the group started (0: none, or truncated since).
	lastCommand atomic.Uint64
	// waiting counts registered writes: while there are none, Stored
	// keeps only lastCommand.
	waiting atomic.Int32

	mu sync.Mutex
	// byData are the registered writes by their entry's first byte:
	// Raft stores the leader's entries from the very slices proposed.
	byData map[*byte]*leaderWrite
	// through is the last index the prediction covers (0: none); end is
	// the log end once every command up to it is applied.
	through uint64
	end     int64
}

// leaderWrite is one batch waiting for its early answer.
type leaderWrite struct {
	key           *byte
	offsets       int64 // lastOffsetDelta+1
	logAppendTime int64 // the entry's, 0 for CreateTime
	ready         chan struct{}
	result        AppendResult // set before ready is closed
	// then, if set, is called once ready is closed (onAnswer).
	then func()
}

// register makes entry's batch, taking offsets offsets, answerable from
// the leader's log; the caller proposes the entry next and, whatever
// happens, calls forget once it stops waiting.
func (w *leaderWrites) register(entry []byte, offsets, logAppendTime int64) *leaderWrite {
	lw := &leaderWrite{key: &entry[0], offsets: offsets, logAppendTime: logAppendTime, ready: make(chan struct{})}
	w.mu.Lock()
	if w.byData == nil {
		w.byData = map[*byte]*leaderWrite{}
	}
	w.byData[lw.key] = lw
	w.mu.Unlock()
	w.waiting.Add(1)
	return lw
}

// forget drops a registration Stored has not answered (the entry was
// refused, or the wait ended first).
func (w *leaderWrites) forget(lw *leaderWrite) {
	w.mu.Lock()
	if w.byData[lw.key] == lw {
		delete(w.byData, lw.key)
		w.waiting.Add(-1)
	}
	w.mu.Unlock()
}

// onAnswer calls fn once lw is answered from the leader's log: on the
// goroutine that stores the entry, so fn must not block, or at once if it
// was answered already. A write forgotten before then never calls it.
func (w *leaderWrites) onAnswer(lw *leaderWrite, fn func()) {
	w.mu.Lock()
	select {
	case <-lw.ready:
		w.mu.Unlock()
		fn()
		return
	default:
	}
	lw.then = fn
	w.mu.Unlock()
}

// Stored implements raft.LogObserver.
func (w *leaderWrites) Stored(e raft.StoredEntry) {
	prevCommand := w.lastCommand.Load()
	if e.Command {
		w.lastCommand.Store(e.Index)
	}
	if w.waiting.Load() == 0 {
		// Nothing to answer: the prediction lapses here, and the next
		// registered write finds the gap and starts it again.
		return
	}
	if then := w.stored(e, prevCommand); then != nil {
		then()
	}
}

// stored is Stored's part under mu; it returns the answered write's
// onAnswer function, to be called once mu is released.
func (w *leaderWrites) stored(e raft.StoredEntry, prevCommand uint64) (then func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.through == 0 || e.Index != w.through+1 {
		w.through = 0
		if !e.Command || prevCommand == 0 {
			return
		}
		index, end := w.applied()
		if index != prevCommand {
			return // commands before this entry are still to be applied
		}
		w.through, w.end = e.Index-1, end
	}
	if !e.Command {
		w.through = e.Index
		return
	}
	var lw *leaderWrite
	if len(e.Data) > 0 {
		lw = w.byData[&e.Data[0]]
	}
	if lw == nil {
		w.through = 0 // what this entry does to the offsets is not known
		return
	}
	delete(w.byData, lw.key)
	w.waiting.Add(-1)
	lw.result = AppendResult{BaseOffset: w.end, LogAppendTime: -1, LogStartOffset: w.logStart()}
	if lw.logAppendTime > 0 {
		lw.result.LogAppendTime = lw.logAppendTime
	}
	w.end += lw.offsets
	w.through = e.Index
	close(lw.ready)
	return lw.then
}

// Truncated implements raft.LogObserver: a prediction over removed
// entries no longer holds. (Compaction after a snapshot removes only
// entries well before the last ones.)
func (w *leaderWrites) Truncated(_, max uint64) {
	if max >= w.lastCommand.Load() {
		w.lastCommand.Store(0)
	}
	w.mu.Lock()
	if max >= w.through {
		w.through = 0
	}
	w.mu.Unlock()
}
