package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/log"
)

// Store is where the coordinator keeps its records: the partitions of
// __transaction_state.
type Store interface {
	// Partitions is the number of partitions, fixed at creation.
	Partitions() int32
	// Append writes records to a partition and returns the offset of the
	// first; it returns once they are as durable as the partition makes
	// any acknowledged write. An error wrapping kerr.NotCoordinator says
	// this broker no longer leads it.
	Append(partition int32, records []log.KeyValue) (int64, error)
	// Replay calls fn for every record of a partition, oldest first
	// (the group coordinator's Store reads the same way).
	Replay(partition int32, fn func(group.StoredRecord)) error
}

// Marker is the end of one transaction, to be written to each of its
// partitions as a control batch.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
}

// MarkerWriter writes a transaction's markers (WriteTxnMarkers to the
// partitions' leaders). It returns nil once every partition has the
// marker or no longer exists; the coordinator retries on an error.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m Marker) error
}

// Settings are the cluster properties the coordinator follows, read at
// each use.
type Settings struct {
	// MaxTimeout bounds the timeout a producer may ask for
	// (transaction.max.timeout.ms).
	MaxTimeout time.Duration
	// IDExpiration removes an id whose producer has been idle this long
	// with no transaction open (transactional.id.expiration.ms).
	IDExpiration time.Duration
}

// Options are what a Coordinator needs.
type Options struct {
	Store   Store
	Markers MarkerWriter
	// NewProducerID allocates a producer id no other producer has.
	NewProducerID func(ctx context.Context) (int64, error)
	// GroupPartitions is the number of partitions of __consumer_offsets
	// (AddOffsetsToTxn adds the group's).
	GroupPartitions func() int32
	Settings        func() Settings
	Logger          *slog.Logger
	Now             func() time.Time
}

// Coordinator serves the transactional ids of the partitions of the
// store it loaded.
type Coordinator struct {
	opts   Options
	logger *slog.Logger
	now    func() time.Time

	ctx    context.Context // ends at Close: marker writing stops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	parts  map[int32]*partitionLoad
	ids    map[string]*entry // of loaded partitions only
	closed bool
}

// partitionLoad is one partition of the store as the coordinator serves
// it.
type partitionLoad struct {
	loaded bool
	gen    uint64 // changes at every load and unload
	// epoch is the coordinator epoch written into markers: the
	// partition's leader epoch when it was loaded.
	epoch int32
}

// entry is one transactional id. mu serialises its transitions.
type entry struct {
	id        string
	partition int32
	mu        sync.Mutex
	st        state
	exists    bool // st was written (or replayed)
	// completed is closed when the transaction being prepared is
	// complete (its markers and its completed state written); nil when
	// none is being prepared.
	completed chan struct{}
}

// New makes a coordinator that serves no id until LoadPartition.
func New(opts Options) *Coordinator {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{opts: opts, logger: opts.Logger, now: opts.Now, ctx: ctx, cancel: cancel,
		parts: map[int32]*partitionLoad{}, ids: map[string]*entry{}}
}

// Partition is the __transaction_state partition of a transactional id.
func (c *Coordinator) Partition(id string) int32 {
	return group.PartitionFor(id, c.opts.Store.Partitions())
}

// Close stops serving every id and waits for marker writing to stop.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	for _, pl := range c.parts {
		pl.loaded = false
		pl.gen++
	}
	c.ids = map[string]*entry{}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// ErrClosed is returned by LoadPartition after Close.
var ErrClosed = errors.New("txn: coordinator closed")

// LoadPartition replays partition p and serves its ids, with epoch as
// the coordinator epoch of the markers it writes. Transactions found
// preparing are completed: their markers written again (writing one
// twice is harmless), then their state completed. Loading a partition
// already loaded with the same epoch does nothing.
func (c *Coordinator) LoadPartition(p int32, epoch int32) error {
	if p < 0 || p >= c.opts.Store.Partitions() {
		return fmt.Errorf("txn: __transaction_state has no partition %d", p)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	pl := c.parts[p]
	if pl == nil {
		pl = &partitionLoad{}
		c.parts[p] = pl
	}
	if pl.loaded && pl.epoch == epoch {
		c.mu.Unlock()
		return nil
	}
	c.dropLocked(p)
	pl.gen++
	gen := pl.gen
	c.mu.Unlock()

	found := map[string]state{}
	err := c.opts.Store.Replay(p, func(r group.StoredRecord) {
		id, st, deleted, err := decodeRecord(r.Key, r.Value)
		if err != nil {
			c.logger.Warn("skipping an unreadable __transaction_state record", "partition", p, "err", err)
			return
		}
		if deleted {
			delete(found, id)
			return
		}
		found[id] = st
	})
	if err != nil {
		return fmt.Errorf("txn: replay __transaction_state-%d: %w", p, err)
	}
	c.mu.Lock()
	if c.closed || pl.gen != gen {
		c.mu.Unlock()
		return nil // unloaded or loaded again meanwhile: that wins
	}
	pl.loaded, pl.epoch = true, epoch
	var preparing []*entry
	for id, st := range found {
		e := &entry{id: id, partition: p, st: st, exists: true}
		c.ids[id] = e
		if st.status == kmsg.TransactionStatePrepareCommit || st.status == kmsg.TransactionStatePrepareAbort {
			preparing = append(preparing, e)
		}
	}
	c.mu.Unlock()
	for _, e := range preparing {
		c.complete(e, gen)
	}
	c.logger.Info("loaded __transaction_state partition", "partition", p, "transactional_ids", len(found), "completing", len(preparing), "coordinator_epoch", epoch)
	return nil
}

// UnloadPartition stops serving partition p's ids: later requests get
// NOT_COORDINATOR and its marker writing stops.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pl := c.parts[p]
	if pl == nil || !pl.loaded {
		return
	}
	pl.loaded = false
	pl.gen++
	c.dropLocked(p)
	c.logger.Info("unloaded __transaction_state partition", "partition", p)
}

func (c *Coordinator) dropLocked(p int32) {
	for id, e := range c.ids {
		if e.partition == p {
			delete(c.ids, id)
		}
	}
}

// servingLocked is the code for requests about ids of partition p: 0
// when it is loaded. c.mu is held.
func (c *Coordinator) servingLocked(p int32) (uint64, int16) {
	if c.closed {
		return 0, kerr.CoordinatorNotAvailable.Code
	}
	pl := c.parts[p]
	if pl == nil || !pl.loaded {
		return 0, kerr.NotCoordinator.Code
	}
	return pl.gen, 0
}

// lock returns id's entry with its mutex held and the load generation it
// belongs to, creating an entry (not yet written) when create is set; or
// the code to answer. A nil entry with code 0 is an id nobody knows.
func (c *Coordinator) lock(id string, create bool) (*entry, uint64, int16) {
	p := c.Partition(id)
	for {
		c.mu.Lock()
		gen, code := c.servingLocked(p)
		if code != 0 {
			c.mu.Unlock()
			return nil, 0, code
		}
		e := c.ids[id]
		if e == nil && create {
			e = &entry{id: id, partition: p}
			c.ids[id] = e
		}
		c.mu.Unlock()
		if e == nil {
			return nil, gen, 0
		}
		e.mu.Lock()
		c.mu.Lock()
		g, code := c.servingLocked(p)
		mine := c.ids[id] == e
		c.mu.Unlock()
		switch {
		case code != 0 || g != gen:
			e.mu.Unlock()
			return nil, 0, kerr.NotCoordinator.Code
		case !mine:
			e.mu.Unlock() // expired meanwhile: look again
			continue
		}
		return e, gen, 0
	}
}

// current reports whether partition p is still served by load gen.
func (c *Coordinator) current(p int32, gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, code := c.servingLocked(p)
	return code == 0 && g == gen
}

// coordinatorEpoch is partition p's coordinator epoch.
func (c *Coordinator) coordinatorEpoch(p int32) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pl := c.parts[p]; pl != nil {
		return pl.epoch
	}
	return -1
}

// write makes next the entry's state: appended to the store, then
// applied. e.mu is held. The code is NOT_COORDINATOR when the partition
// moved (before or during the append), COORDINATOR_NOT_AVAILABLE for
// another failure (clients retry both after looking the coordinator up).
func (c *Coordinator) write(e *entry, gen uint64, next state) int16 {
	_, err := c.opts.Store.Append(e.partition, []log.KeyValue{stateRecord(e.id, next)})
	switch {
	case !c.current(e.partition, gen), errors.Is(err, kerr.NotCoordinator):
		return kerr.NotCoordinator.Code
	case err != nil:
		c.logger.Warn("writing transaction state", "transactional_id", e.id, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	e.st, e.exists = next, true
	return 0
}

// complete writes the markers of e's prepared transaction and then its
// completed state, on its own goroutine, retrying until it succeeds or
// the partition is no longer served by gen.
func (c *Coordinator) complete(e *entry, gen uint64) {
	if e.completed == nil {
		e.completed = make(chan struct{})
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		backoff := 50 * time.Millisecond
		for c.ctx.Err() == nil && c.current(e.partition, gen) {
			if done := c.completeOnce(e, gen); done {
				return
			}
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
}

// completeOnce is one attempt of complete; done says to stop.
func (c *Coordinator) completeOnce(e *entry, gen uint64) (done bool) {
	e.mu.Lock()
	st := e.st
	e.mu.Unlock()
	commit := st.status == kmsg.TransactionStatePrepareCommit
	if !commit && st.status != kmsg.TransactionStatePrepareAbort {
		return true
	}
	m := Marker{ProducerID: st.producerID, ProducerEpoch: st.producerEpoch, Commit: commit,
		CoordinatorEpoch: c.coordinatorEpoch(e.partition), Partitions: st.partitions}
	if !c.current(e.partition, gen) {
		return true // another coordinator has it now
	}
	if len(m.Partitions) > 0 {
		if err := c.opts.Markers.WriteMarkers(c.ctx, m); err != nil {
			c.logger.Warn("writing transaction markers; will retry", "transactional_id", e.id, "commit", commit, "err", err)
			return false
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.st.status != st.status || e.st.producerEpoch != st.producerEpoch || !c.current(e.partition, gen) {
		return true // someone else moved it on
	}
	next := e.st
	next.status = kmsg.TransactionStateCompleteAbort
	if commit {
		next.status = kmsg.TransactionStateCompleteCommit
	}
	next.partitions, next.updateMs = nil, c.now().UnixMilli()
	if c.write(e, gen, next) != 0 {
		return !c.current(e.partition, gen)
	}
	if e.completed != nil {
		close(e.completed)
		e.completed = nil
	}
	return true
}
