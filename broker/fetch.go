package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/memory"
	"github.com/weir-broker/weir/coalescer"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
)

// Isolation levels, as Fetch and ListOffsets encode them.
const (
	ReadUncommitted int8 = 0
	ReadCommitted   int8 = 1
)

// FetchPartition is one partition of a fetch, in request order.
type FetchPartition struct {
	Topic       *Topic // nil: unknown; Err says how it was named
	UnknownErr  error  // UNKNOWN_TOPIC_OR_PARTITION or UNKNOWN_TOPIC_ID when Topic is nil
	Partition   int32
	Offset      int64
	MaxBytes    int32
	LeaderEpoch int32 // current_leader_epoch, -1 to skip the check
}

// FetchRequest is a fetch after the protocol layer resolved names and IDs.
type FetchRequest struct {
	MaxBytes  int32
	MinBytes  int32
	MaxWait   time.Duration
	Isolation int8
	// FollowerOK lets a follower replica serve the fetch (consumer
	// fetches v11+, KIP-392); otherwise only the leader does.
	FollowerOK bool
	// RackID is the consumer's rack (v11+): the leader directs it to an
	// in-sync replica there.
	RackID     string
	Partitions []FetchPartition
	// Waiter, set for a fetch session's fetches, keeps the session's
	// wake-up registered with its partitions between fetches; nil: the
	// fetch registers its own while it waits.
	Waiter *SessionWaiter
}

// FetchResult is one partition's answer.
type FetchResult struct {
	Err              error
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Records are read-only: with coalescing they are shared with other
	// fetches. Release gives them back.
	Records []byte
	// PreferredReadReplica is the replica the consumer should fetch
	// from instead (KIP-392), -1 for none.
	PreferredReadReplica int32
	// Aborted lists, for read_committed, the aborted transactions the
	// consumer needs to skip what it is given of them (Kafka's
	// AbortedTransactions); nil for read_uncommitted.
	Aborted []AbortedTxn
	// shared holds Records for a coalesced read; otherwise reads, when
	// set, takes their buffer back.
	shared *coalescer.Result
	reads  *memory.Reads
	// byFollower: a follower replica served this partition.
	byFollower bool
	// part and appendedBefore let a waiting fetch see how many bytes
	// arrived since this read without reading again.
	part           *Partition
	appendedBefore int64
}

// Release gives back the result's record buffer (a coalesced read's
// reference); Records must not be used afterwards.
func (r *FetchResult) Release() {
	if r.shared != nil {
		r.shared.Release()
		r.shared = nil
	} else if r.reads != nil {
		r.reads.Return(r.Records)
		r.reads = nil
	}
	r.Records = nil
}

// FetchPath is what consumer and follower fetches go through: planning a
// fetch's reads under KIP-74's budget and waiting for its minimum bytes,
// choosing where a consumer reads (follower_fetch.go), the read buffers
// and the fetch response budget (fetch_memory.go), and the read
// coalescer (coalescing.go). The Broker composes it; what it needs of the
// rest of the broker it is handed.
type FetchPath struct {
	fetchPathDeps

	coalescer *coalescer.Coalescer
	// fetchReads owns consumer fetches' read buffers and the fetch
	// response budget they are charged to (fetch_memory_budget_bytes).
	fetchReads *memory.Reads
	fetchWaits sync.Pool // of *fetchWait
	// logReads and logReadBytes count the log reads of consumer fetches.
	logReads, logReadBytes atomic.Uint64
	// served counts fetched partitions by the role of the replica.
	served struct{ leader, follower servedCounters }
}

// fetchPathDeps are what a FetchPath is handed of the rest of the broker.
type fetchPathDeps struct {
	node       config.Node
	props      *config.Values
	logger     *slog.Logger
	registerer prometheus.Registerer
	// liveBroker looks a live broker up, for the rack of a preferred
	// read replica.
	liveBroker func(id int32) (BrokerInfo, bool)
	// watchProperty follows a property's effective value (coalescing is
	// an enterprise feature).
	watchProperty func(name string, fn func(value string)) (stop func())
}

func newFetchPath(d fetchPathDeps) FetchPath {
	return FetchPath{fetchPathDeps: d}
}

// Fetch reads the partitions with KIP-74's budget, waiting up to MaxWait
// for MinBytes of data. out must have len(req.Partitions) elements; it is
// filled in request order, and the caller releases each result once it
// has written it (FetchResult.Release).
//
// The budget is Kafka's, applied in request order: each partition reads
// at most min(its max bytes, what the response has left); while no
// partition has returned data the read is obligatory (the first batch
// comes back whole even if it is bigger than every limit, so consumers
// always progress), after that every read is strict.
func (fe *FetchPath) Fetch(ctx context.Context, req *FetchRequest, out []FetchResult) {
	maxBytes := req.MaxBytes
	if limit := int32(fe.props.Int("fetch_max_bytes")); maxBytes <= 0 || maxBytes > limit {
		maxBytes = limit
	}
	minBytes := int(req.MinBytes)
	if minBytes > int(maxBytes) {
		minBytes = int(maxBytes)
	}
	var w *fetchWait
	var wake <-chan struct{}
	defer func() {
		if w != nil {
			fe.releaseFetchWait(w)
		}
	}()
	defer fe.countServed(out)
	total, answerNow := fe.readOnce(ctx, req, maxBytes, out)
	for {
		if total >= minBytes || answerNow || req.MaxWait <= 0 || len(req.Partitions) == 0 || ctx.Err() != nil {
			return
		}
		if w == nil {
			// Register, then look again: an append that landed between
			// the first read and the registration is seen then. A
			// single partition wakes the fetch only once enough bytes
			// arrived since its read; with several, any append may
			// complete the sum. A fetch session's partitions stay
			// registered between its fetches.
			w = fe.fetchWait(req.MaxWait)
			wake = w.wake
			if req.Waiter != nil && len(req.Partitions) > 1 && req.Waiter.register(out) {
				wake = req.Waiter.wake
			} else {
				for i, fp := range req.Partitions {
					if p, _, err := fp.resolve(req.FollowerOK); err == nil {
						wakeAt := p.log.AppendedBytes() + 1
						if len(req.Partitions) == 1 && out[i].part == p {
							wakeAt = out[i].appendedBefore + int64(minBytes-total)
						}
						p.addWaiter(w.wake, wakeAt)
						w.parts = append(w.parts, p)
					}
				}
			}
			// Nothing appended since the read: it stands, and an idle
			// fetch of many partitions is spared a second pass.
			if arrivedSince(out) > 0 {
				total, answerNow = fe.readOnce(ctx, req, maxBytes, out)
				continue
			}
		}
		// Like Kafka's DelayedFetch, count what arrives instead of
		// reading it: read again only once it may reach minBytes.
	wait:
		for {
			select {
			case <-wake:
				if total+arrivedSince(out) >= minBytes {
					break wait
				}
			case <-w.timer.C:
				fe.readOnce(ctx, req, maxBytes, out)
				return
			case <-ctx.Done():
				return
			}
		}
		total, answerNow = fe.readOnce(ctx, req, maxBytes, out)
	}
}

// fetchWait is what a waiting fetch needs: its wake-up channel, registered
// with its partitions, and its max-wait timer. Tailing consumers wait on
// nearly every fetch, so these are recycled rather than made each time.
type fetchWait struct {
	wake  chan struct{}
	timer *time.Timer
	parts []*Partition
}

func (fe *FetchPath) fetchWait(maxWait time.Duration) *fetchWait {
	w, ok := fe.fetchWaits.Get().(*fetchWait)
	if !ok {
		w = &fetchWait{wake: make(chan struct{}, 1), timer: time.NewTimer(maxWait)}
		return w
	}
	// Since Go 1.23 a stopped timer's channel holds no stale tick, and
	// Reset starts it afresh.
	w.timer.Reset(maxWait)
	return w
}

func (fe *FetchPath) releaseFetchWait(w *fetchWait) {
	for _, p := range w.parts {
		p.removeWaiter(w.wake)
	}
	clear(w.parts)
	w.parts = w.parts[:0]
	w.timer.Stop()
	select { // a wake-up that came too late
	case <-w.wake:
	default:
	}
	fe.fetchWaits.Put(w)
}

// arrivedSince is how many record bytes the fetched partitions' logs
// appended since they were last read: an upper bound of what a new read
// would add.
func arrivedSince(out []FetchResult) int {
	n := int64(0)
	for i := range out {
		if p := out[i].part; p != nil {
			n += p.log.AppendedBytes() - out[i].appendedBefore
		}
	}
	return int(n)
}

// readOnce makes one pass over the partitions. It reports the bytes
// read and whether the fetch must be answered at once: a partition failed
// (as Kafka does) or was directed to a preferred read replica (KIP-392:
// the consumer should move without waiting).
func (fe *FetchPath) readOnce(ctx context.Context, req *FetchRequest, maxBytes int32, out []FetchResult) (total int, answerNow bool) {
	remaining := int(maxBytes)
	obligatory := true
	for i := range req.Partitions {
		fp := &req.Partitions[i]
		r := &out[i]
		r.Release() // of the previous pass, when long polling
		*r = FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, PreferredReadReplica: -1}
		if req.Isolation == ReadCommitted {
			r.Aborted = noAborted
		}
		p, leader, err := fp.resolve(req.FollowerOK)
		if err != nil {
			r.Err, answerNow = err, true
			continue
		}
		r.byFollower = !leader
		r.part, r.appendedBefore = p, p.log.AppendedBytes()
		upTo := p.HighWatermark()
		if req.Isolation == ReadCommitted {
			upTo = p.LastStableOffset()
		}
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset = p.HighWatermark(), p.LastStableOffset(), p.LogStartOffset()
		limit := min(int(fp.MaxBytes), remaining)
		mode := log.Strict
		if obligatory {
			mode = log.Obligatory
		}
		if leader {
			if id := fe.preferredReadReplica(p, fp.Offset, req.RackID); id >= 0 {
				r.PreferredReadReplica, answerNow = id, true
				continue
			}
		}
		if fp.Offset < r.LogStartOffset {
			// Checked here as well as by the log: a shared result read
			// before retention moved the start must not answer.
			r.Err, answerNow = kerr.OffsetOutOfRange, true
			continue
		}
		// A follower behind the consumer (it read up to the leader's
		// high watermark) waits for its log to catch up rather than fail;
		// past the leader's high watermark too, nobody can serve it yet.
		if !leader && fp.Offset > upTo {
			if known := p.leaderHWPlus1.Load(); known > 0 && fp.Offset > known-1 {
				r.Err, answerNow = kerr.OffsetNotAvailable, true
				continue
			}
		}
		// At upTo exactly (an idle consumer's every partition) the
		// offset is valid without asking the log for its end.
		if fp.Offset == upTo || (fp.Offset > upTo && (fp.Offset <= p.log.EndOffset() || !leader)) {
			// Caught up (the offset is valid but nothing is readable
			// yet): the answer is empty without a read. Long-polling
			// consumers spend most passes here.
			continue
		}
		data, shared, err := fe.readPartition(ctx, p, fp.Offset, limit, mode, upTo, req.Isolation)
		if err != nil {
			r.Err, answerNow = readError(err), true
			continue
		}
		r.shared = shared
		if shared == nil {
			r.reads = fe.fetchReads
		}
		if req.Isolation == ReadCommitted {
			// Only read_committed needs where the data ends: the
			// header walk is skipped on every other fetch.
			if end, ok := log.EndOffset(data); ok {
				r.Aborted = p.abortedBetween(fp.Offset, end)
			}
		}
		if len(data) > 0 {
			r.Records = data
			obligatory = false
			total += len(data)
			remaining = max(0, remaining-len(data))
		}
	}
	return total, answerNow
}

// resolve finds the partition replica that serves fp, and whether it is
// the leader.
func (fp *FetchPartition) resolve(followerOK bool) (p *Partition, leader bool, err error) {
	if fp.Topic == nil {
		return nil, false, fp.UnknownErr
	}
	if followerOK {
		return fp.Topic.ReplicaPartition(fp.Partition, fp.LeaderEpoch)
	}
	p, err = fp.Topic.LeaderPartition(fp.Partition, fp.LeaderEpoch)
	return p, err == nil, err
}

// readError maps log errors to the per-partition codes consumers handle.
func readError(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The fetch's own connection went away while it waited for a
		// shared read: nobody reads this answer.
		return kerr.RequestTimedOut
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, log.ErrClosed):
		return kerr.NotLeaderForPartition
	default:
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
}
