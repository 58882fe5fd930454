package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/broker/txn"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
)

// Every partition is a Raft group over its replicas, named after the
// topic id (never reused, unlike names) and the partition number. The
// group's leader is the Kafka partition leader and its term the leader
// epoch.
func partitionGroupName(id controller.TopicID, partition int32) string {
	return "p-" + id.String() + "-" + strconv.Itoa(int(partition))
}

const (
	// servicePartitionRead copies batches from a replica's log to one
	// installing a snapshot.
	servicePartitionRead = "partition.read"
	// pullChunkBytes bounds one partition.read response.
	pullChunkBytes = 4 << 20
	// replicaOpTimeout bounds a barrier, a leader report, one pull.
	replicaOpTimeout = 15 * time.Second
)

// Replicas are this broker's partition replicas: opening them as the
// controller's view assigns them here, their Raft groups' configurations
// and leadership, the records a lagging replica copies from its leader,
// and the leaders' upkeep of their followers (isr.go). The Broker
// composes it and the topic table holds the replicas it opens; what it
// needs of the rest of the broker it is handed.
type Replicas struct {
	replicaDeps
	// byGroup indexes the running replicas by Raft group name.
	byGroup sync.Map
	// leaderThrottle and followerThrottle hold catch-up copies to the
	// replication throttles (throttle.go).
	leaderThrottle, followerThrottle byteThrottle
	// leaderless is what the dead-leader sweep (failover.go) remembers
	// between its runs; only the sweep touches it.
	leaderless      map[*Partition]leaderlessSince
	progressFormats progressFormats // leaders that read binary progress reports
}

// replicaDeps are what Replicas are handed of the rest of the broker.
type replicaDeps struct {
	node   config.Node
	props  *config.Values
	logger *slog.Logger
	// mux and incarnation are the controller node's, which opens after
	// Replicas are built and before any replica opens.
	mux         func() *raft.Mux
	incarnation func() controller.IncarnationID
	view        func() *controller.View
	propose     func(controller.Command) (controller.Result, error)
	topicDir    func(name string, id controller.TopicID) string
	logConfig   func(*Topic) log.Config
	groups      func() *group.Coordinator
	txns        func() *txn.Coordinator
	stop        <-chan struct{} // closed when the broker stops
	// done counts the broker's goroutines, which Close waits for.
	done *sync.WaitGroup
}

func newReplicas(d replicaDeps) Replicas {
	return Replicas{replicaDeps: d}
}

func (rs *Replicas) raftDir() string { return filepath.Join(rs.node.DataDir, "raft") }

// openAssigned opens the partitions of ct this node holds a replica of
// that are not open yet, and closes (removing its files) a replica a
// reassignment moved off this node; the topic table's lock is held. A
// partition hosted elsewhere stays nil in the table.
func (rs *Replicas) openAssigned(t *Topic, ct *controller.Topic, v *controller.View) {
	have := t.partitions()
	parts := make([]*Partition, max(len(ct.Partitions), len(have)))
	copy(parts, have)
	changed := len(have) < len(ct.Partitions)
	var open []int
	for i := range ct.Partitions {
		p, mine := parts[i], slices.Contains(ct.Partitions[i].Replicas, rs.node.NodeID)
		switch {
		case p == nil && mine:
			open = append(open, i)
		case p != nil && !mine:
			rs.closeMoved(p)
			parts[i], changed = nil, true
		case p != nil && p.solo && len(ct.Partitions[i].Replicas) > 1:
			// A sole replica gaining others: its short timers and
			// lease would have it step down as soon as a second voter
			// joins, so its group restarts with a partition's.
			rs.logger.Info("restarting a sole replica's group for the replicas joining it", "topic", t.Name(), "partition", i)
			p.close()
			parts[i], changed = nil, true
			open = append(open, i)
		}
	}
	if len(open) == 0 && !changed {
		return
	}
	// Replicas open in parallel: each one's Raft bootstrap waits for an
	// fsync of the node's shared Raft log, and concurrent ones share it
	// (group commit), so a topic of a thousand partitions opens in about
	// the time of a few dozen fsyncs instead of a thousand.
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(openReplicaWorkers, len(open)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p, err := rs.openReplica(t, int32(i), ct.Partitions[i], v)
				if err != nil {
					rs.logger.Error("opening partition replica", "topic", t.Name(), "partition", i, "err", err)
					continue
				}
				parts[i] = p
			}
		}()
	}
	for _, i := range open {
		work <- i
	}
	close(work)
	wg.Wait()
	parts = parts[:len(ct.Partitions)]
	t.parts.Store(&parts)
}

// closeMoved stops a replica that no longer belongs on this node (a
// reassignment completed or was cancelled) and removes its files: its
// group's leader has removed it from the group, or will.
func (rs *Replicas) closeMoved(p *Partition) {
	rs.logger.Info("removing a replica reassigned away from this broker", "topic", p.topic.Name(), "partition", p.Index)
	p.close()
	rs.removeReplicaFiles(p)
	if err := os.RemoveAll(p.dir); err != nil {
		rs.logger.Warn("removing a reassigned replica's log", "topic", p.topic.Name(), "partition", p.Index, "err", err)
	}
}

// openReplicaWorkers bounds how many replicas of one topic open at once.
const openReplicaWorkers = 128

// openReplica opens this broker's replica of a partition: its log,
// brought back to its checkpoint, and its Raft group, bootstrapped when
// the partition is new. A replica that joins a group that already ran
// (its data was lost, or it was just assigned) starts empty and is
// caught up by the leader.
func (rs *Replicas) openReplica(t *Topic, index int32, cp controller.Partition, v *controller.View) (*Partition, error) {
	dir := filepath.Join(rs.topicDir(t.Name(), t.ID()), strconv.Itoa(int(index)))
	p := newPartition(t, index, dir)
	if t.Name() == GroupTopic {
		// Markers settle the offsets transactions committed here.
		p.onMarker = func(offset, pid int64, commit bool) {
			if c := rs.groups(); c != nil {
				c.TxnMarker(index, offset, pid, commit)
			}
		}
	}
	l, err := log.Open(dir, rs.logConfig(t))
	if err != nil {
		return nil, err
	}
	p.log = l
	if err := p.recoverFromCheckpoint(len(cp.Replicas) == 1, rs.logger.With("topic", t.Name(), "partition", index)); err != nil {
		l.Close()
		return nil, fmt.Errorf("recover %s/%d: %w", t.Name(), index, err)
	}
	p.pull = func(from, upTo int64) (recordChunk, error) { return rs.pullRecords(p, from, upTo) }
	p.writes.applied, p.writes.logStart = p.appliedEnd, p.log.LogStartOffset

	cfg := raft.Config{
		Group: partitionGroupName(t.ID(), index), NodeID: strconv.Itoa(int(rs.node.NodeID)), Dir: rs.raftDir(),
		StateMachine: p, Class: "partition", Logger: rs.logger.With("topic", t.Name(), "partition", index),
		NoSnapshotRestoreOnStart: true,
		SnapshotThreshold:        rs.node.RaftSnapshotEntries,
		TrailingLogs:             rs.node.RaftTrailingEntries,
		SnapshotInterval:         30 * time.Second,
		HeartbeatTimeout:         partitionHeartbeatTimeout,
		LeaderHeartbeatTimeout:   partitionLeaderHeartbeatTimeout,
		ElectionTimeout:          partitionElectionTimeout,
		LeaderLeaseTimeout:       partitionLeaseTimeout,
		CommitTimeout:            partitionCommitTimeout,
		// A connection's pipelined produce requests queue while the
		// leader writes, and share its next write and fsync.
		BatchApply:  true,
		LogObserver: &p.writes,
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 1024
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = 512
	}
	if len(cp.Replicas) == 1 {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = soloRaftTimeouts()
		p.solo = true
	}
	g, err := rs.mux().Start(cfg)
	if err != nil {
		l.Close()
		return nil, err
	}
	p.group = g
	if !g.HasExistingState() {
		switch {
		case cp.LeaderTerm == 0, len(cp.Replicas) == 1:
			// A new partition, or a sole replica whose data is gone:
			// nobody else holds it.
			err = g.Bootstrap(rs.replicaServers(cp, v))
			if err == nil && len(cp.Replicas) > 1 && cp.Replicas[0] == rs.node.NodeID {
				// The preferred leader stands at once instead of after a
				// heartbeat timeout, so a new topic has its leaders in
				// milliseconds, where Kafka's controller names them.
				g.Campaign()
			}
		default:
			// The group's configuration names this broker's former
			// incarnation, which the mux no longer answers for: this
			// replica can neither vote nor take entries until the leader
			// re-adds it as a non-voter (maintainMembers) and, once it
			// caught up, as a voter.
			rs.logger.Warn("partition replica has no Raft state; waiting for the leader to re-add and catch it up",
				"topic", t.Name(), "partition", index)
		}
	}
	if err != nil && !errors.Is(err, raft.ErrExistingState) {
		g.Shutdown()
		l.Close()
		return nil, err
	}
	rs.byGroup.Store(g.Name(), p)
	p.onStop = func() { rs.setCoordinatorLeadership(p, false) }
	p.onFail = func() {
		p.leaderEpoch.Store(-1)
		rs.setCoordinatorLeadership(p, false)
		rs.logger.Error("partition replica failed; stopping its raft group", "topic", t.Name(), "partition", index, "err", p.failure())
		g.Shutdown()
	}
	g.OnLeaderChange(func(leading bool) { rs.leadershipChanged(p, leading) })
	return p, nil
}

// A partition group's timers, sized for thousands of groups per broker
// rather than for the fastest failover of one (docs/architecture.md,
// "Many Raft groups"). hashicorp/raft runs them per group: an idle leader
// heartbeats each follower every tenth to fifth of its heartbeat timeout
// (1.2–2.4 s with the leader's 12 s); the node's transport lets a
// heartbeat wait up to 250 ms to share a frame with other groups'
// (raft.Config's transport delay), and it carries the commit index to a
// follower that has not learned it yet (raft/transport_commit.go), so an
// idle follower's commit index, and the high watermark a follower fetch
// sees, lags the leader's by at most about 2.7 s after produce stops
// (while produce flows, every append carries it). hashicorp's own
// keep-alive, an empty append every CommitTimeout–2×CommitTimeout, is
// thereby needed only by peers that do not take commit notices (a rolling
// upgrade from an older release): every 30–60 s. Its other role, retrying
// a follower whose append failed, is the leader's catch-up barrier
// (raft/catchup.go), written once such a follower answers heartbeats
// again. The heartbeats alone keep the leader's lease (3 s, so that
// a heartbeat delayed by its batch still renews it) and reach a follower
// within its heartbeat timeout (3 s); one that times out anyway only
// starts a pre-vote, which the replicas that still hear from the leader
// refuse. A follower that hears nothing
// for that long campaigns at its next check: a dead leader's partitions
// are led elsewhere, as Metadata shows, within 12 s (3–9 s to notice,
// then the votes, the new leader's barrier and its report to the
// controller); Kafka notices a dead broker after
// broker.session.timeout.ms, 9 s. A dead process is noticed sooner, from
// its refused address (failover.go). A follower whose progress report
// shows it behind the high watermark makes the leader heartbeat at once
// (Group.NotifyFollowers), so it learns the last commit within about a
// second. docs/architecture.md says why longer timers are not used.
const (
	partitionHeartbeatTimeout       = 3 * time.Second
	partitionLeaderHeartbeatTimeout = 12 * time.Second
	partitionElectionTimeout        = 3 * time.Second
	partitionLeaseTimeout           = 3 * time.Second
	partitionCommitTimeout          = 30 * time.Second
)

// soloRaftTimeouts are the timers of a group with a single voter: it
// elects itself after the heartbeat timeout and has nobody to compete
// with, so a short one only makes starts faster.
func soloRaftTimeouts() (heartbeat, election, lease time.Duration) {
	return 100 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond
}

// replicaServers is a partition group's first configuration: every
// replica votes. Every replica computes the same list from the same view.
func (rs *Replicas) replicaServers(cp controller.Partition, v *controller.View) []raft.Server {
	servers := make([]raft.Server, 0, len(cp.Replicas))
	for _, id := range cp.Replicas {
		servers = append(servers, raft.Server{ID: strconv.Itoa(int(id)), Addr: rs.memberAddr(id, v), Voter: true})
	}
	return servers
}

// memberAddr is a broker's address in partition group configurations:
// its RPC address and the incarnation that must answer there, so a broker
// whose data was replaced is not taken for its former self.
func (rs *Replicas) memberAddr(id int32, v *controller.View) string {
	if id == rs.node.NodeID {
		return raft.MemberAddr(rs.mux().Addr(), rs.incarnation().String())
	}
	reg, ok := v.Broker(id)
	if !ok {
		return ""
	}
	return raft.MemberAddr(reg.RPCAddr, reg.Incarnation.String())
}

// isMemberAddr reports whether addr is memberAddr(id, v) without
// building it: leaders check every follower of every group every second.
func (rs *Replicas) isMemberAddr(addr string, id int32, v *controller.View) bool {
	if id == rs.node.NodeID {
		return addr == rs.memberAddr(id, v)
	}
	reg, ok := v.Broker(id)
	if !ok {
		return addr == ""
	}
	host, identity := raft.SplitMemberAddr(addr)
	return host == reg.RPCAddr && reg.Incarnation.Is(identity)
}

// signalStop stops the replica's background work (once).
func (p *Partition) signalStop() {
	p.stopOnce.Do(func() { close(p.stop) })
}

// close stops the replica: its Raft group, then its log.
func (p *Partition) close() error {
	p.signalStop()
	var err error
	if p.group != nil {
		err = p.group.Shutdown()
	}
	p.done.Wait()
	p.leaderEpoch.Store(-1)
	if p.onStop != nil {
		p.onStop()
	}
	p.wake()
	if p.log != nil {
		// A clean stop checkpoints what was applied, so the next start
		// has nothing to truncate and replay.
		p.appendMu.Lock()
		if p.failure() == nil && !p.deleted.Load() {
			err = errors.Join(err, p.checkpointLocked())
		}
		p.appendMu.Unlock()
		err = errors.Join(err, p.log.Close())
	}
	return err
}

// awaitReplicaLeaders waits, up to leaderWait, until every local replica
// knows its group's leader and the ones led here serve, so a broker
// that finished starting answers produce and fetch at once.
func (rs *Replicas) awaitReplicaLeaders() {
	self := strconv.Itoa(int(rs.node.NodeID))
	settled := waitFor(rs.stop, leaderWait, func() bool {
		for _, p := range rs.localReplicas() {
			if p.failure() != nil {
				continue
			}
			id, _ := p.group.Leader()
			if id == "" || (id == self && !p.IsLeader()) {
				return false
			}
		}
		return true
	})
	if !settled {
		rs.logger.Warn("some partitions have no leader yet", "waited", leaderWait)
	}
}

// removeFiles deletes a closed replica's Raft state (its log directory
// goes with the topic's).
func (rs *Replicas) removeReplicaFiles(p *Partition) {
	if p.group == nil {
		return
	}
	rs.byGroup.CompareAndDelete(p.group.Name(), p)
	if err := rs.mux().RemoveGroupState(rs.raftDir(), p.group.Name()); err != nil {
		rs.logger.Warn("removing a deleted partition's raft state", "group", p.group.Name(), "err", err)
	}
}

// leadershipChanged is the partition group's LeaderFunc: it runs on the
// raft mux's dispatcher, so it only records the news and makes sure one
// followLeadership goroutine acts on it.
func (rs *Replicas) leadershipChanged(p *Partition, leading bool) {
	p.leadMu.Lock()
	p.leadWant = leading
	p.leadSeq++
	start := !p.leadBusy
	p.leadBusy = true
	p.leadMu.Unlock()
	if start {
		// The group's Shutdown returns only after its last callback, and
		// close waits for p.done after that, so this Add never races the
		// Wait.
		p.done.Add(1)
		go rs.followLeadership(p)
	}
}

// followLeadership acts on the replica's leadership changes in order,
// the latest one last, and exits when there is none left.
func (rs *Replicas) followLeadership(p *Partition) {
	defer p.done.Done()
	for {
		p.leadMu.Lock()
		stopped := false
		select {
		case <-p.stop:
			stopped = true
		default:
		}
		if stopped || p.leadSeen == p.leadSeq {
			p.leadSeen = p.leadSeq
			p.leadBusy = false
			p.leadMu.Unlock()
			return
		}
		leading := p.leadWant
		p.leadSeen = p.leadSeq
		p.leadMu.Unlock()
		rs.applyLeadership(p, leading)
	}
}

// applyLeadership makes the replica follow one leadership change. A new
// leader serves once it has applied everything committed before its term
// (a barrier), then reports itself to the controller so every broker's
// Metadata names it. A replica that fails stops its group (onFail) so the
// others elect a leader whose log can be trusted.
func (rs *Replicas) applyLeadership(p *Partition, leading bool) {
	g := p.group
	if !leading {
		p.leaderEpoch.Store(-1)
		rs.setCoordinatorLeadership(p, false)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicaOpTimeout)
	err := g.Barrier(ctx)
	cancel()
	if err != nil {
		rs.logger.Warn("new partition leader could not apply its backlog", "topic", p.topic.Name(), "partition", p.Index, "err", err)
		return
	}
	term := g.Term()
	if !g.IsLeader() || term > uint64(1<<31-1) {
		return
	}
	p.tracking.reset(time.Now())
	p.leaderEpoch.Store(int32(term))
	p.wake()
	rs.setCoordinatorLeadership(p, true)
	rs.done.Add(1)
	go rs.reportLeader(p, term)
}

// reportLeader tells the controller this replica leads the partition in
// term, retrying while it still does.
func (rs *Replicas) reportLeader(p *Partition, term uint64) {
	defer rs.done.Done()
	backoff := 100 * time.Millisecond
	for attempt := 0; attempt < 20; attempt++ {
		if p.leaderEpoch.Load() != int32(term) {
			return
		}
		_, err := rs.propose(controller.ReportLeader{
			TopicID: p.topic.ID(), Partition: p.Index,
			Leader: rs.node.NodeID, LeaderEpoch: int32(term), Term: term,
		})
		if err == nil || errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition) {
			return
		}
		select {
		case <-rs.stop:
			return
		case <-p.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// setCoordinatorLeadership loads or unloads the groups of a
// __consumer_offsets partition, or the transactional ids of a
// __transaction_state partition, as this replica gains or loses its
// leadership.
func (rs *Replicas) setCoordinatorLeadership(p *Partition, leading bool) {
	if p.topic.Name() != GroupTopic && p.topic.Name() != TxnTopic {
		return
	}
	p.coordMu.Lock()
	defer p.coordMu.Unlock()
	if p.leading == leading {
		return
	}
	p.leading = leading
	switch p.topic.Name() {
	case GroupTopic:
		if c := rs.groups(); c != nil {
			rs.applyGroupLeadership(c, p)
		}
	case TxnTopic:
		if c := rs.txns(); c != nil {
			rs.applyTxnLeadership(c, p)
		}
	}
}

// applyGroupLeadership makes the coordinator match p's leadership;
// p.coordMu is held.
func (rs *Replicas) applyGroupLeadership(c *group.Coordinator, p *Partition) {
	if !p.leading {
		c.UnloadPartition(p.Index)
		return
	}
	if err := c.LoadPartition(p.Index); err != nil {
		rs.logger.Error("loading groups of a led __consumer_offsets partition", "partition", p.Index, "err", err)
	}
}

// LeaderPartition returns partition i when this broker leads it, after
// Kafka's leader epoch check: a client's current leader epoch above ours
// is UNKNOWN_LEADER_EPOCH (we are behind), below ours
// FENCED_LEADER_EPOCH (it is); -1 skips the check.
func (t *Topic) LeaderPartition(i int32, currentLeaderEpoch int32) (*Partition, error) {
	p, err := t.LocalPartition(i)
	if err != nil {
		return nil, err
	}
	if err := p.failure(); err != nil {
		return nil, err
	}
	if err := p.checkLeaderEpoch(currentLeaderEpoch); err != nil {
		return nil, err
	}
	return p, nil
}

// checkLeaderEpoch is LeaderPartition's check on a replica already found.
func (p *Partition) checkLeaderEpoch(currentLeaderEpoch int32) error {
	t, i := p.topic, p.Index
	epoch := p.leaderEpoch.Load()
	switch {
	case epoch < 0:
		return fmt.Errorf("%w: this broker does not lead %s/%d", kerr.NotLeaderForPartition, t.Name(), i)
	case currentLeaderEpoch < 0:
	case currentLeaderEpoch > epoch:
		return fmt.Errorf("%w: %s/%d: leader epoch %d is newer than this leader's %d", kerr.UnknownLeaderEpoch, t.Name(), i, currentLeaderEpoch, epoch)
	case currentLeaderEpoch < epoch:
		return fmt.Errorf("%w: %s/%d: leader epoch %d is older than the current %d", kerr.FencedLeaderEpoch, t.Name(), i, currentLeaderEpoch, epoch)
	}
	return nil
}

// partitionReadRequest asks a replica for batches of its log.
type partitionReadRequest struct {
	Group string `json:"group"`
	From  int64  `json:"from"`
	UpTo  int64  `json:"up_to"`
}

// pullRecords copies batches [from, upTo) from the partition's leader.
func (rs *Replicas) pullRecords(p *Partition, from, upTo int64) (recordChunk, error) {
	_, addr := p.group.Leader()
	addr, _ = raft.SplitMemberAddr(addr)
	if addr == "" {
		return recordChunk{}, errors.New("no leader to copy records from")
	}
	req, _ := json.Marshal(partitionReadRequest{Group: p.group.Name(), From: from, UpTo: upTo})
	ctx, cancel := context.WithTimeout(context.Background(), replicaOpTimeout)
	defer cancel()
	resp, err := rs.mux().Call(ctx, addr, servicePartitionRead, req)
	if err != nil {
		return recordChunk{}, err
	}
	// The next chunk waits for this one's bytes to fit the throttle.
	if err := rs.followerThrottle.wait(context.Background(), len(resp), int64(rs.props.Int("follower_replication_throttled_rate"))); err != nil {
		return recordChunk{}, err
	}
	return decodeRecordChunk(resp)
}

// servePartitionRead answers partition.read from this replica's log.
func (rs *Replicas) servePartitionRead(ctx context.Context, _ string, data []byte) ([]byte, error) {
	var req partitionReadRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	p := rs.replicaByGroup(req.Group)
	if p == nil {
		return nil, fmt.Errorf("no replica of %s here", req.Group)
	}
	c, err := p.readChunk(req.From, req.UpTo)
	if err != nil {
		return nil, err
	}
	if err := rs.leaderThrottle.wait(ctx, len(c.Records), int64(rs.props.Int("leader_replication_throttled_rate"))); err != nil {
		return nil, err
	}
	return c.encode(), nil
}

// readChunk reads up to pullChunkBytes of whole batches from from, none
// past upTo or the high watermark, for a replica catching up.
func (p *Partition) readChunk(from, upTo int64) (recordChunk, error) {
	c := recordChunk{LogStart: p.log.LogStartOffset(), End: p.log.EndOffset()}
	upTo = min(upTo, p.HighWatermark())
	if from >= c.LogStart && from < upTo {
		recs, err := p.log.Read(from, pullChunkBytes, log.Strict, upTo)
		if err != nil {
			return recordChunk{}, err
		}
		if len(recs) == 0 { // one batch larger than the chunk, or a hole
			if recs, err = p.log.Read(from, pullChunkBytes, log.Obligatory, upTo); err != nil {
				return recordChunk{}, err
			}
		}
		c.Records = recs
	}
	// Read after the records: whatever holes they show, the cleaner
	// checkpoint already covered when they were read (it only rises, but
	// for a truncation, which no committed record below it survives).
	c.Cleaned = p.log.FirstDirtyOffset()
	return c, nil
}

func (rs *Replicas) replicaByGroup(name string) *Partition {
	if v, ok := rs.byGroup.Load(name); ok {
		return v.(*Partition)
	}
	return nil
}
