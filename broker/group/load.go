package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors of LoadPartition and Load.
var (
	// ErrLoadCanceled: the partition was unloaded while it was loading.
	// The unload wins, so the partition stays unloaded; a broker that
	// unloads on resignation can ignore this error.
	ErrLoadCanceled = errors.New("group: partition unloaded while it was loading")
	// ErrClosed: the coordinator was closed before or during the load.
	ErrClosed = errors.New("group: coordinator closed")
)

// loadState is where a partition of the store is in its load cycle.
type loadState int8

const (
	unloaded loadState = iota // its groups get NOT_COORDINATOR
	loading                   // COORDINATOR_LOAD_IN_PROGRESS
	loaded                    // served
)

// partitionLoad is the coordinator's view of one partition of the store.
type partitionLoad struct {
	state loadState
	// gen changes whenever a load starts or the partition is unloaded. A
	// replay takes effect only if gen is what it was when the replay
	// started, so an unload during a replay wins over it.
	gen uint64
	// done is closed when the load that set state to loading ends; err
	// is why it failed, for the LoadPartition calls that waited for it.
	done chan struct{}
	err  error
}

// loadRun is one started load of a partition.
type loadRun struct {
	p    int32
	gen  uint64
	done chan struct{}
}

// servingLocked is the code for requests about groups of partition p: 0
// when p is loaded. c.mu is held.
func (c *Coordinator) servingLocked(p int32) int16 {
	if c.closed {
		return kerr.CoordinatorNotAvailable.Code
	}
	pl := c.parts[p]
	switch {
	case pl == nil || pl.state == unloaded:
		return kerr.NotCoordinator.Code
	case pl.state == loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// loadingLocked reports whether any partition is loading. c.mu is held.
func (c *Coordinator) loadingLocked() bool {
	for _, pl := range c.parts {
		if pl.state == loading {
			return true
		}
	}
	return false
}

// startLoadLocked marks p loading. c.mu is held.
func (c *Coordinator) startLoadLocked(p int32) loadRun {
	pl := c.parts[p]
	if pl == nil {
		pl = &partitionLoad{}
		c.parts[p] = pl
	}
	pl.gen++
	pl.state, pl.done, pl.err = loading, make(chan struct{}), nil
	return loadRun{p: p, gen: pl.gen, done: pl.done}
}

// cancelLoad gives up a load that was started but will not run.
func (c *Coordinator) cancelLoad(run loadRun) {
	c.mu.Lock()
	if pl := c.parts[run.p]; pl.gen == run.gen {
		pl.gen++
		pl.state = unloaded
	}
	c.mu.Unlock()
	close(run.done)
}

// LoadPartition replays partition p of the store and serves its groups.
// While it runs, requests for p's groups get COORDINATOR_LOAD_IN_PROGRESS;
// other partitions are served as before. It returns nil once p is loaded:
// at once if p already is (its live groups are kept, no replay), after
// the load in progress if p is loading. An UnloadPartition of p before
// the load ends wins: p stays unloaded and the load returns
// ErrLoadCanceled. If the replay fails, p is left unloaded (its groups
// get NOT_COORDINATOR) and the error returned.
//
// The live groups of a loaded partition are the truth: a broker that
// stops leading p must UnloadPartition it before loading it again, or it
// would keep serving state that another leader has since changed.
func (c *Coordinator) LoadPartition(p int32) error {
	if p < 0 || p >= c.opts.Store.Partitions() {
		return fmt.Errorf("group: __consumer_offsets has no partition %d", p)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if pl := c.parts[p]; pl != nil && pl.state != unloaded {
		// A second replay would only repeat the first; wait for it.
		return c.awaitLocked(pl)
	}
	run := c.startLoadLocked(p)
	c.mu.Unlock()
	start := time.Now()
	n, err := c.load(run)
	if err == nil {
		c.logger.Info("loaded __consumer_offsets partition", "partition", p, "groups", n, "took", time.Since(start))
	}
	return err
}

// awaitLocked waits for the load of a partition that is loading and
// reports how it ended: nil if it loaded the partition, ErrLoadCanceled
// if the partition was unloaded meanwhile, else the load's error. c.mu is
// held on entry and released on return.
func (c *Coordinator) awaitLocked(pl *partitionLoad) error {
	switch pl.state {
	case loaded:
		c.mu.Unlock()
		return nil
	case unloaded:
		c.mu.Unlock()
		return ErrLoadCanceled
	}
	gen, done := pl.gen, pl.done
	c.mu.Unlock()
	<-done
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case pl.gen != gen:
		return ErrLoadCanceled
	case pl.state == loaded:
		return nil
	}
	return pl.err
}

// UnloadPartition stops serving partition p: its groups stop, parked
// JoinGroup and SyncGroup requests are answered NOT_COORDINATOR (so
// clients look the coordinator up again), and later requests for its
// groups get NOT_COORDINATOR. A load of p in progress is canceled. Groups
// of other partitions are untouched. It returns once every group of p has
// stopped; a group busy in a Store append delays that, so it must not be
// called from a goroutine that such an append waits on.
func (c *Coordinator) UnloadPartition(p int32) {
	partitions := c.opts.Store.Partitions()
	c.mu.Lock()
	pl := c.parts[p]
	if pl == nil {
		// Never loaded: nothing to stop, and no load to cancel.
		c.mu.Unlock()
		return
	}
	was := pl.state
	pl.gen++
	pl.state = unloaded
	var groups []*group
	for id, g := range c.groups {
		if PartitionFor(id, partitions) == p {
			groups = append(groups, g)
			delete(c.groups, id)
		}
	}
	c.mu.Unlock()
	stopGroups(groups, kerr.NotCoordinator.Code)
	if was != unloaded {
		c.logger.Info("unloaded __consumer_offsets partition", "partition", p, "groups", len(groups))
	}
}

// Load loads every partition Owns selects (all without Owns), as
// LoadPartition does, and returns at the first failure; partitions it
// loaded before stay loaded. Until its turn comes a partition's groups
// get COORDINATOR_LOAD_IN_PROGRESS. A partition already loading is
// waited for; one unloaded meanwhile is skipped, as the unload wins.
func (c *Coordinator) Load() error {
	var owned []int32
	for p := int32(0); p < c.opts.Store.Partitions(); p++ {
		if c.opts.Owns == nil || c.opts.Owns(p) {
			owned = append(owned, p)
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	runs := map[int32]loadRun{}
	for _, p := range owned {
		if pl := c.parts[p]; pl == nil || pl.state == unloaded {
			runs[p] = c.startLoadLocked(p)
		}
	}
	c.mu.Unlock()
	start := time.Now()
	var groups int
	for i, p := range owned {
		var n int
		var err error
		if run, ok := runs[p]; ok {
			n, err = c.load(run)
		} else {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				return ErrClosed
			}
			err = c.awaitLocked(c.parts[p])
		}
		if errors.Is(err, ErrLoadCanceled) {
			continue
		}
		if err != nil {
			for _, q := range owned[i+1:] {
				if run, ok := runs[q]; ok {
					c.cancelLoad(run)
				}
			}
			return err
		}
		groups += n
	}
	c.logger.Info("group coordinator loaded", "partitions", len(owned), "groups", groups, "took", time.Since(start))
	return nil
}

// load replays a started load's partition and, unless the load was
// canceled meanwhile, serves the groups found. It returns how many.
func (c *Coordinator) load(run loadRun) (int, error) {
	defer close(run.done)
	state, err := c.replay(run.p)
	var restored []*group
	if err == nil {
		// Built outside the table lock: requests for other partitions
		// go on during a large load.
		for id, lg := range state {
			if lg.meta == nil && len(lg.offsets) == 0 && (lg.cg == nil || lg.cg.meta == nil) {
				continue
			}
			g := newGroup(c, id)
			g.restore(lg)
			restored = append(restored, g)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pl := c.parts[run.p]
	switch {
	case c.closed:
		err = ErrClosed
	case pl.gen != run.gen:
		err = ErrLoadCanceled
	case err != nil:
		pl.state, pl.err = unloaded, err
	default:
		for _, g := range restored {
			// No group of an unloaded partition is in the table (get
			// creates none, UnloadPartition removes them), so this is
			// only a guard against serving two copies of a group.
			if c.groups[g.id] != nil {
				g.timer.Stop()
				continue
			}
			c.groups[g.id] = g
			go g.run()
		}
		pl.state = loaded
		return len(restored), nil
	}
	for _, g := range restored {
		g.timer.Stop()
	}
	return 0, err
}

// replay reads partition p into the live state of its groups: the latest
// record per key wins and a null value deletes.
func (c *Coordinator) replay(p int32) (map[string]*loadedGroup, error) {
	state := map[string]*loadedGroup{}
	get := func(id string) *loadedGroup {
		lg := state[id]
		if lg == nil {
			lg = &loadedGroup{offsets: map[string]map[int32]offset{}}
			state[id] = lg
		}
		return lg
	}
	partitions := c.opts.Store.Partitions()
	var skipped, misplaced int
	// Offsets committed in transactions wait, per producer, for their
	// marker.
	txnPending := map[int64][]pendingReplay{}
	err := c.opts.Store.Replay(p, func(sr StoredRecord) {
		if sr.Control {
			for _, pr := range txnPending[sr.ProducerID] {
				if sr.Commit {
					commitPending(get(pr.group).offsets, pr.topic, pr.partition, pendingOffset{pr.o, pr.logOffset})
				}
			}
			delete(txnPending, sr.ProducerID)
			return
		}
		r, ok, err := decodeRecord(sr.Key, sr.Value)
		if err != nil {
			skipped++
			return
		}
		if !ok {
			return
		}
		if PartitionFor(r.group, partitions) != p {
			// Served here, it would outlive the unload of the
			// partition it belongs to.
			misplaced++
			return
		}
		lg := get(r.group)
		switch {
		case r.consumer != nil:
			lg.applyConsumer(r.consumer)
		case sr.Transactional && r.isOffset && r.offset != nil:
			txnPending[sr.ProducerID] = append(txnPending[sr.ProducerID], pendingReplay{r.group, r.topic, r.partition, *r.offset, sr.Offset})
		case sr.Transactional:
		case r.isOffset && r.offset != nil:
			o := *r.offset
			o.logOffset = sr.Offset
			lg.setOffset(r.topic, r.partition, o)
		case r.isOffset:
			delete(lg.offsets[r.topic], r.partition)
			if len(lg.offsets[r.topic]) == 0 {
				delete(lg.offsets, r.topic)
			}
		default:
			lg.meta = r.meta
		}
	})
	if err != nil {
		return nil, fmt.Errorf("replaying __consumer_offsets partition %d: %w", p, err)
	}
	for pid, prs := range txnPending {
		for _, pr := range prs {
			lg := get(pr.group)
			lg.addPending(pid, pr.topic, pr.partition, pendingOffset{pr.o, pr.logOffset})
		}
	}
	if skipped > 0 {
		c.logger.Warn("skipped undecodable __consumer_offsets records", "partition", p, "records", skipped)
	}
	if misplaced > 0 {
		c.logger.Warn("skipped __consumer_offsets records of groups of another partition", "partition", p, "records", misplaced)
	}
	return state, nil
}

// loadedGroup accumulates one group's records during replay.
type loadedGroup struct {
	meta    *kmsg.GroupMetadataValue
	offsets map[string]map[int32]offset
	txn     txnOffsets
	cg      *loadedConsumer // records of a consumer-protocol group
}

// pendingReplay is a transactional offset record met during replay.
type pendingReplay struct {
	group, topic string
	partition    int32
	o            offset
	logOffset    int64
}

func (lg *loadedGroup) setOffset(topic string, partition int32, o offset) {
	if lg.offsets[topic] == nil {
		lg.offsets[topic] = map[int32]offset{}
	}
	lg.offsets[topic][partition] = o
}

func (lg *loadedGroup) addPending(pid int64, topic string, partition int32, po pendingOffset) {
	if lg.txn == nil {
		lg.txn = txnOffsets{}
	}
	lg.txn.add(pid, topic, partition, po)
}

// restore rebuilds a group from its records. Members come back with a
// fresh session: they must heartbeat within their session timeout or be
// removed, as after a coordinator move in Kafka.
func (g *group) restore(lg *loadedGroup) {
	g.offsets = lg.offsets
	g.txn = lg.txn
	if lg.cg != nil && lg.cg.meta != nil {
		g.restoreConsumer(lg.cg, g.c.now())
		g.publish()
		return
	}
	m := lg.meta
	if m == nil {
		g.publish()
		return
	}
	now := g.c.now()
	g.hadMembers = true
	g.protocolType, g.generation = m.ProtocolType, m.Generation
	if m.Protocol != nil {
		g.protocol = *m.Protocol
	}
	if m.Leader != nil {
		g.leader = *m.Leader
	}
	for _, vm := range m.Members {
		mm := &member{
			id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			protocolType:     m.ProtocolType,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			assignment:       vm.Assignment,
			lastHeartbeat:    now,
		}
		g.members[mm.id] = mm
		if mm.instanceID != nil {
			g.static[*mm.instanceID] = mm.id
		}
	}
	if len(g.members) > 0 {
		g.state = Stable
	}
	if m.CurrentStateTimestamp > 0 {
		g.stateSince = time.UnixMilli(m.CurrentStateTimestamp)
	}
	g.publish()
}
