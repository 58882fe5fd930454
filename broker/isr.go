package broker

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/raft"
)

// In-sync replicas and leader balance.
//
// Raft decides what is committed; the ISR is what Kafka clients and
// operators see of replication health. Every second each follower
// replica tells its leader how far its log reaches (partition.progress,
// one call per leader broker for all its partitions). A leader counts a
// follower in sync when, within replica_lag_time_max_ms, the follower's
// log reached the leader's end as it was at the follower's previous
// report (Kafka's lastCaughtUpTime rule), and reports ISR changes to the
// controller, which every broker's Metadata shows.
//
// The same loop moves leadership back to a partition's preferred replica
// (the first of its replicas) once that replica is in sync and fully
// caught up, so a broker that returns from a failure takes its share of
// leaders again.
const (
	servicePartitionProgress = "partition.progress"
	replicaProgressEvery     = time.Second
	// promoteWithin is how recently a catching-up replica must have
	// been caught up (see keepsUp) to get its vote back: a few progress
	// reports.
	promoteWithin = 3 * replicaProgressEvery
	// leaderBalanceHoldoff keeps a new leader from handing leadership
	// straight back while the cluster is still settling.
	leaderBalanceHoldoff = 10 * time.Second
)

type progressReport struct {
	NodeID   int32           `json:"node_id"`
	Replicas []progressEntry `json:"replicas"`
}

type progressEntry struct {
	Group string `json:"group"`
	End   int64  `json:"end"`
}

// followerProgress is what a leader knows of one follower.
type followerProgress struct {
	end             int64
	caughtUpAt      time.Time
	prevAt          time.Time
	leaderEndAtPrev int64
}

// leaderTracking is a leading replica's view of its followers, reset at
// each leadership.
type leaderTracking struct {
	mu          sync.Mutex
	since       time.Time
	followers   map[int32]*followerProgress
	reportedISR []int32
}

func (lt *leaderTracking) reset(now time.Time) {
	lt.mu.Lock()
	lt.since, lt.followers, lt.reportedISR = now, map[int32]*followerProgress{}, nil
	lt.mu.Unlock()
}

func (lt *leaderTracking) record(node int32, end, leaderEnd int64, now time.Time) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.followers == nil {
		return
	}
	f := lt.followers[node]
	if f == nil {
		f = &followerProgress{leaderEndAtPrev: -1}
		lt.followers[node] = f
	}
	switch {
	case end >= leaderEnd:
		f.caughtUpAt = now
	case f.leaderEndAtPrev >= 0 && end >= f.leaderEndAtPrev && f.prevAt.After(f.caughtUpAt):
		f.caughtUpAt = f.prevAt
	}
	f.end, f.prevAt, f.leaderEndAtPrev = end, now, leaderEnd
}

// forget drops what the leader knows of node's progress.
func (lt *leaderTracking) forget(node int32) {
	lt.mu.Lock()
	delete(lt.followers, node)
	lt.mu.Unlock()
}

// isr lists the replicas in sync at now, in replica order. A follower
// not heard from since the leadership began counts from its start, as
// Kafka's new leader does with its ISR.
func (lt *leaderTracking) isr(self int32, replicas []int32, now time.Time, lagMax time.Duration) []int32 {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	out := make([]int32, 0, len(replicas))
	for _, r := range replicas {
		if r == self {
			out = append(out, r)
			continue
		}
		caughtUp := lt.since
		if f := lt.followers[r]; f != nil && f.caughtUpAt.After(caughtUp) {
			caughtUp = f.caughtUpAt
		}
		if now.Sub(caughtUp) <= lagMax {
			out = append(out, r)
		}
	}
	return out
}

// caughtUp reports whether node's log reached leaderEnd at its last
// report.
func (lt *leaderTracking) caughtUp(node int32, leaderEnd int64) bool {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	f := lt.followers[node]
	return f != nil && f.end >= leaderEnd
}

// keepsUp reports whether node was caught up within the last window: its
// log reached the leader's end at a report in it, or at its latest report
// reached what the leader had at the one before. Under steady producing
// a follower is rarely level with the leader at the instant it reports,
// yet one that keeps this close is only a report interval behind.
func (lt *leaderTracking) keepsUp(node int32, now time.Time, window time.Duration) bool {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	f := lt.followers[node]
	return f != nil && !f.caughtUpAt.IsZero() && now.Sub(f.caughtUpAt) <= window
}

// current reports whether node may be treated as level with the leader:
// caught up with leaderEnd at its last report, or keeping up within
// promoteWithin (keepsUp). Promotion to voter, leadership transfers and a
// reassignment's removals wait for it.
func (lt *leaderTracking) current(node int32, leaderEnd int64, now time.Time) bool {
	return lt.caughtUp(node, leaderEnd) || lt.keepsUp(node, now, promoteWithin)
}

// reportProgress sends each leader broker the log ends of this broker's
// follower replicas of its partitions.
func (rs *Replicas) reportProgress() {
	self := strconv.Itoa(int(rs.node.NodeID))
	byLeader := map[string]*progressReport{}
	for _, p := range rs.localReplicas() {
		if p.IsLeader() || p.failure() != nil {
			continue
		}
		id, addr := p.group.Leader()
		addr, _ = raft.SplitMemberAddr(addr)
		if addr == "" || id == self {
			continue
		}
		r := byLeader[addr]
		if r == nil {
			r = &progressReport{NodeID: rs.node.NodeID}
			byLeader[addr] = r
		}
		r.Replicas = append(r.Replicas, progressEntry{Group: p.group.Name(), End: p.log.EndOffset()})
	}
	var wg sync.WaitGroup
	for addr, r := range byLeader {
		binaryOK := rs.progressFormats.takesBinary(addr)
		var data []byte
		if binaryOK {
			data = appendProgressHeader(make([]byte, 0, 5+len(r.Replicas)*32), r.NodeID)
			for _, e := range r.Replicas {
				data = appendProgressEntry(data, e.Group, e.End)
			}
		} else {
			var err error
			if data, err = json.Marshal(r); err != nil {
				continue
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), replicaProgressEvery)
			defer cancel()
			reply, err := rs.mux().Call(ctx, addr, servicePartitionProgress, data)
			if err != nil {
				if re := (*raft.RemoteError)(nil); binaryOK && errors.As(err, &re) {
					// An older broker back at that address.
					rs.progressFormats.set(addr, false)
				}
				rs.logger.Debug("replica progress report", "leader", addr, "err", err)
				return
			}
			rs.recordLeaderHighWatermarks(addr, reply)
		}()
	}
	wg.Wait()
}

// servePartitionProgress records followers' progress on the partitions
// led here, answering in the report's format (isr_wire.go).
func (rs *Replicas) servePartitionProgress(_ context.Context, _ string, data []byte) ([]byte, error) {
	now := time.Now()
	var (
		out   []byte
		reply = progressReply{Binary: true}
	)
	record := func(node int32, group string, end int64) {
		p := rs.replicaByGroup(group)
		if p == nil || !p.IsLeader() {
			return
		}
		hw := p.HighWatermark()
		p.tracking.record(node, end, hw, now)
		if end < hw {
			// The follower may only lack the last commit index,
			// which an idle leader's heartbeats bring every few
			// seconds: send them now.
			p.group.NotifyFollowers()
		}
		if out != nil {
			out = appendProgressEntry(out, group, hw)
		} else {
			reply.HighWatermarks = append(reply.HighWatermarks, progressEntry{Group: group, End: hw})
		}
	}
	if isBinaryProgress(data) {
		out = appendProgressHeader(make([]byte, 0, len(data)), rs.node.NodeID)
		if err := decodeProgress(data, record); err != nil {
			return nil, err
		}
		return out, nil
	}
	var r progressReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	for _, e := range r.Replicas {
		record(r.NodeID, e.Group, e.End)
	}
	return json.Marshal(reply)
}

// progressReply tells followers the leader's high watermark of each
// partition they reported (followers serving consumer fetches judge an
// offset past it unavailable). Binary says that the leader reads binary
// reports; brokers of earlier versions leave it out.
type progressReply struct {
	HighWatermarks []progressEntry `json:"high_watermarks"`
	Binary         bool            `json:"binary,omitempty"`
}

// recordLeaderHighWatermarks keeps what the progress reply of the leader
// broker at addr said. An empty reply (an older broker) leaves them
// unknown.
func (rs *Replicas) recordLeaderHighWatermarks(addr string, data []byte) {
	if len(data) == 0 {
		return
	}
	record := func(_ int32, group string, hw int64) {
		if p := rs.replicaByGroup(group); p != nil && !p.IsLeader() {
			p.leaderHWPlus1.Store(hw + 1)
		}
	}
	if isBinaryProgress(data) {
		if err := decodeProgress(data, record); err != nil {
			rs.logger.Debug("replica progress reply", "leader", addr, "err", err)
		}
		return
	}
	var reply progressReply
	if err := json.Unmarshal(data, &reply); err != nil {
		rs.logger.Debug("replica progress reply", "leader", addr, "err", err)
		return
	}
	for _, e := range reply.HighWatermarks {
		record(0, e.Group, e.End)
	}
	rs.progressFormats.set(addr, reply.Binary)
}

// maintainLeaders reports ISR changes of the partitions led here and
// hands leadership to preferred replicas that are back in sync. Reports
// go out concurrently (maxConcurrentReports workers), each computed just
// before it is proposed, so one slow proposal neither delays the others
// nor makes them stale. Workers rather than a goroutine per partition:
// this runs every second over every partition led here, and almost
// always finds nothing to do.
func (rs *Replicas) maintainLeaders() {
	v := rs.view()
	lagMax := time.Duration(rs.props.Int("replica_lag_time_max_ms")) * time.Millisecond
	balance := rs.props.Bool("enable_leader_balancer")
	led := make(chan *Partition)
	var wg sync.WaitGroup
	for range maxConcurrentReports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range led {
				rs.maintainLeader(p, v, lagMax, balance)
			}
		}()
	}
	for _, p := range rs.localReplicas() {
		if p.LeaderEpoch() >= 0 {
			led <- p
		}
	}
	close(led)
	wg.Wait()
}

// maintainLeader is maintainLeaders' work for one partition.
func (rs *Replicas) maintainLeader(p *Partition, v *controller.View, lagMax time.Duration, balance bool) {
	// One partition's copy, not its topic's: a topic of thousands of
	// partitions would be copied once per partition otherwise.
	cp, ok := v.Partition(p.topic.ID(), p.Index)
	if !ok {
		return
	}
	// One copy of the group's configuration serves both.
	servers, err := p.group.Configuration()
	if err != nil {
		return
	}
	rs.reportISR(p, cp, servers, lagMax)
	if rs.maintainMembers(p, cp, v, servers, time.Now()) {
		return
	}
	if balance {
		rs.balanceLeader(p, cp, time.Now(), lagMax, v)
	}
}

// maxConcurrentReports bounds the controller proposals one broker's
// leader upkeep has in flight.
const maxConcurrentReports = 8

// reportISR tells the controller the partition's ISR when it changed.
func (rs *Replicas) reportISR(p *Partition, cp controller.Partition, servers []raft.Server, lagMax time.Duration) {
	epoch := p.LeaderEpoch()
	if epoch < 0 {
		return
	}
	isr := withoutNonvoters(servers, p.tracking.isr(rs.node.NodeID, cp.Replicas, time.Now(), lagMax))
	p.tracking.mu.Lock()
	changed := !slices.Equal(isr, p.tracking.reportedISR)
	p.tracking.mu.Unlock()
	if !changed {
		return
	}
	_, err := rs.propose(controller.ReportLeader{
		TopicID: p.topic.ID(), Partition: p.Index,
		Leader: rs.node.NodeID, LeaderEpoch: epoch, Term: uint64(epoch), ISR: isr,
	})
	if err != nil {
		return
	}
	p.tracking.mu.Lock()
	p.tracking.reportedISR = isr
	p.tracking.mu.Unlock()
	rs.logger.Info("in-sync replicas changed", "topic", p.topic.Name(), "partition", p.Index, "isr", isr)
}

// inSyncReplicas lists the replicas of p, led here, that are in sync by
// this leader's tracking and live by the controller's view: what
// min.insync.replicas counts. It is the ISR reportISR would report now,
// less brokers whose session expired, which leave Kafka's ISR as soon as
// the controller fences them.
func (rs *Replicas) inSyncReplicas(p *Partition) []int32 {
	v := rs.view()
	cp, ok := v.Partition(p.topic.ID(), p.Index)
	if !ok {
		return nil
	}
	now := time.Now()
	lagMax := time.Duration(rs.props.Int("replica_lag_time_max_ms")) * time.Millisecond
	servers, err := p.group.Configuration()
	if err != nil {
		return nil
	}
	isr := withoutNonvoters(servers, p.tracking.isr(rs.node.NodeID, cp.Replicas, now, lagMax))
	return slices.DeleteFunc(isr, func(r int32) bool { return r != rs.node.NodeID && !v.Live(r, now) })
}

// withoutNonvoters drops from isr the replicas the partition's Raft group
// configuration servers holds as non-voters: a replica catching up from
// new data is not in sync, however close it is, until it votes again —
// reporting it would let Metadata promise a redundancy the group does
// not have.
func withoutNonvoters(servers []raft.Server, isr []int32) []int32 {
	for _, s := range servers {
		if s.Voter {
			continue
		}
		if id, err := strconv.Atoi(s.ID); err == nil {
			isr = slices.DeleteFunc(isr, func(r int32) bool { return r == int32(id) })
		}
	}
	return isr
}

// maintainMembers keeps the group's configuration naming each replica's
// current incarnation and address. A replica whose incarnation changed
// (its data was replaced) is demoted to a non-voter at its new address,
// so it is caught up without voting on a log it does not have, and
// promoted back once it reached the leader's log end. A replica that only
// moved its RPC address keeps its vote. servers is the group's
// configuration. It reports whether it changed anything.
func (rs *Replicas) maintainMembers(p *Partition, cp controller.Partition, v *controller.View, servers []raft.Server, now time.Time) bool {
	self := strconv.Itoa(int(rs.node.NodeID))
	for _, s := range servers {
		if s.ID == self {
			continue
		}
		id, err := strconv.Atoi(s.ID)
		if err != nil || !slices.Contains(cp.Replicas, int32(id)) || !v.Live(int32(id), now) {
			continue
		}
		want := s.Addr // as a rule; built only when it differs
		if !rs.isMemberAddr(s.Addr, int32(id), v) {
			want = rs.memberAddr(int32(id), v)
		}
		_, wantIncarnation := raft.SplitMemberAddr(want)
		_, haveIncarnation := raft.SplitMemberAddr(s.Addr)
		var change string
		var do func(ctx context.Context) error
		switch {
		case s.Addr != want && s.Voter && haveIncarnation != "" && haveIncarnation != wantIncarnation:
			change = "demoted a replica with new data to catch up"
			do = func(ctx context.Context) error {
				if err := p.group.DemoteVoter(ctx, s.ID); err != nil {
					return err
				}
				return p.group.AddNonvoter(ctx, s.ID, want)
			}
		case s.Addr != want && s.Voter:
			change = "updated a replica's address"
			do = func(ctx context.Context) error { return p.group.AddVoter(ctx, s.ID, want) }
		case s.Addr != want:
			change = "updated a catching-up replica's address"
			do = func(ctx context.Context) error { return p.group.AddNonvoter(ctx, s.ID, want) }
		case !s.Voter && p.tracking.current(int32(id), p.HighWatermark(), now):
			change = "promoted a caught-up replica to voter"
			do = func(ctx context.Context) error { return p.group.AddVoter(ctx, s.ID, want) }
		default:
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), replicaOpTimeout)
		err = do(ctx)
		cancel()
		if err != nil {
			rs.logger.Warn("partition group membership", "topic", p.topic.Name(), "partition", p.Index, "replica", id, "change", change, "err", err)
		} else {
			rs.logger.Info("partition group membership", "topic", p.topic.Name(), "partition", p.Index, "replica", id, "change", change)
		}
		return true
	}
	return rs.reshapeGroup(p, cp, v, servers, now)
}

// balanceLeader moves leadership to the preferred replica when it is in
// sync, fully caught up and live, and this leadership has settled.
func (rs *Replicas) balanceLeader(p *Partition, cp controller.Partition, now time.Time, lagMax time.Duration, v *controller.View) {
	if len(cp.Replicas) < 2 || cp.Replicas[0] == rs.node.NodeID || p.LeaderEpoch() < 0 {
		return
	}
	preferred := cp.Replicas[0]
	p.tracking.mu.Lock()
	settled := now.Sub(p.tracking.since) >= leaderBalanceHoldoff
	p.tracking.mu.Unlock()
	if !settled {
		return
	}
	reg, why := rs.preferredReady(p, cp, v, now, lagMax)
	if why != "" {
		return
	}
	rs.logger.Info("moving leadership to the preferred replica", "topic", p.topic.Name(), "partition", p.Index, "to", preferred)
	if err := p.group.TransferLeadership(strconv.Itoa(int(preferred)), reg.RPCAddr); err != nil {
		rs.logger.Warn("leadership transfer", "topic", p.topic.Name(), "partition", p.Index, "to", preferred, "err", err)
	}
}

// localReplicas lists the running replicas on this broker.
func (rs *Replicas) localReplicas() []*Partition {
	var out []*Partition
	rs.byGroup.Range(func(_, v any) bool {
		out = append(out, v.(*Partition))
		return true
	})
	return out
}
