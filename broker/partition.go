package broker

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
)

// Partition is this broker's replica of one partition: its log, the Raft
// group that replicates it, its high watermark, its idempotent producers
// and the fetches waiting for data.
//
// Every replica applies the same committed entries in the same order
// (replica_fsm.go), so logs, producer state and epoch caches are
// identical everywhere; only the leader serves produce and consumer
// fetches.
type Partition struct {
	Index int32
	topic *Topic
	log   *log.Log
	dir   string

	// appendMu serialises every change to the log and the state derived
	// from it: the apply goroutine, snapshot restore, retention and
	// checkpoints.
	appendMu  sync.Mutex
	producers producerTable
	epochs    epochCache
	applied   uint64 // last Raft index whose effect the log holds, by appendMu

	ckptMu     sync.Mutex
	checkpoint checkpoint // the newest checkpoint, by ckptMu
	// ckptOnDisk says checkpoint is in the file: a new partition's
	// empty log has none until its first entry (see Apply).
	ckptOnDisk bool

	group *raft.Group // nil until the replica starts, and for detached topics
	// solo: the group was started with a sole replica's short timers,
	// which a group of several must not keep (openAssigned reopens it).
	solo bool
	// pull copies batches from the leader's log (snapshot catch-up).
	pull func(from, upTo int64) (recordChunk, error)

	// leaderEpoch is the Raft term while this replica leads and has
	// applied everything committed before its term; -1 otherwise.
	leaderEpoch atomic.Int32
	// tracking is the leader's view of its followers (isr.go).
	tracking leaderTracking
	// coordMu orders the group coordinator's loads and unloads of this
	// partition (only __consumer_offsets) with leadership changes.
	coordMu sync.Mutex
	leading bool // by coordMu

	// hwm is the high watermark: the end of what this replica applied,
	// which is committed by construction. It is published after the log
	// append returns, so a reader that sees it can read every batch
	// below it.
	hwm atomic.Int64
	// leaderHWPlus1 is, on a follower, the leader's high watermark plus
	// one as its last progress reply said (0: not known): a consumer
	// fetch past it asks for what nobody can serve yet.
	leaderHWPlus1 atomic.Int64
	// firstOpen is the first offset of the oldest open transaction, -1
	// for none (txn_partition.go); aborted lists the aborted ones.
	firstOpen atomic.Int64
	aborted   abortedTxns
	// onMarker, when set, hears of every transaction marker applied
	// (__consumer_offsets: the group coordinator); it must not block.
	onMarker func(offset, producerID int64, commit bool)
	deleted  atomic.Bool
	// failed is set when the log can no longer be trusted (a failed
	// fsync or write): the replica stops applying and answers
	// KAFKA_STORAGE_ERROR until the broker restarts.
	failed atomic.Pointer[error]
	// txnGate orders transactional batches with markers while this
	// replica leads (txn_verify.go).
	txnGate txnGate
	// writes answers acks=1 from the leader's Raft log (produce_acks.go).
	writes leaderWrites

	stopOnce sync.Once
	stop     chan struct{} // closed when the replica is closing
	done     sync.WaitGroup
	// onStop runs once the replica stopped, in close (the broker's
	// leadership bookkeeping), and onFail once it failed.
	onStop, onFail func()

	// leadMu guards what the group's leadership callback left for
	// followLeadership (replication.go), which runs only while there is
	// something to act on: an idle replica costs no goroutine.
	leadMu   sync.Mutex
	leadWant bool   // the latest leadership reported
	leadSeq  uint64 // reports so far
	leadSeen uint64 // reports acted on
	leadBusy bool   // a followLeadership goroutine is running

	waitMu sync.Mutex
	// waiters are waiting fetches, each with the log's appended-bytes
	// count at which an append is worth waking it for.
	waiters map[chan struct{}]int64
}

func newPartition(t *Topic, index int32, dir string) *Partition {
	p := &Partition{Index: index, topic: t, dir: dir, stop: make(chan struct{}), waiters: map[chan struct{}]int64{}}
	p.leaderEpoch.Store(-1)
	p.firstOpen.Store(-1)
	return p
}

// Topic is the topic the partition belongs to.
func (p *Partition) Topic() *Topic { return p.topic }

// HighWatermark is the offset below which every record is committed.
func (p *Partition) HighWatermark() int64 { return p.hwm.Load() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// Log gives read access to the partition's log.
func (p *Partition) Log() *log.Log { return p.log }

// LeaderEpoch is the partition's leader epoch while this replica leads
// it, else -1.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// IsLeader reports whether this replica leads the partition and serves
// produce and fetch.
func (p *Partition) IsLeader() bool { return p.leaderEpoch.Load() >= 0 }

func (p *Partition) markDeleted() { p.deleted.Store(true) }

func (p *Partition) setConfig(cfg log.Config) {
	if p.log != nil {
		p.log.SetConfig(cfg)
	}
}

// addWaiter registers ch to be signalled when the high watermark moves
// with the log's appended bytes (log.AppendedBytes) at wakeAt or more,
// and on every other change (leadership, a snapshot, closing).
// Registering before reading means no advance between the read and the
// wait is missed.
func (p *Partition) addWaiter(ch chan struct{}, wakeAt int64) {
	p.waitMu.Lock()
	p.waiters[ch] = wakeAt
	p.waitMu.Unlock()
}

func (p *Partition) removeWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	delete(p.waiters, ch)
	p.waitMu.Unlock()
}

// wake signals every waiting fetch.
func (p *Partition) wake() { p.wakeAt(math.MaxInt64) }

// wakeAppended signals the waiting fetches that an append brought to
// their threshold. Waking only those matters with many consumers tailing
// a partition: every small append would otherwise wake each of them just
// to go back to sleep.
func (p *Partition) wakeAppended() { p.wakeAt(p.log.AppendedBytes()) }

func (p *Partition) wakeAt(appended int64) {
	p.waitMu.Lock()
	for ch, at := range p.waiters {
		if at > appended {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.waitMu.Unlock()
}

// AppendResult is the outcome of a produce to one partition.
type AppendResult struct {
	BaseOffset     int64
	LogAppendTime  int64
	LogStartOffset int64
}
