package group

import (
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state, named as DescribeGroups names it.
type State string

const (
	Empty               State = "Empty"
	PreparingRebalance  State = "PreparingRebalance"
	CompletingRebalance State = "CompletingRebalance"
	Stable              State = "Stable"
	Dead                State = "Dead"
)

// offset is one committed offset.
type offset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  int64 // ms
	// logOffset is where the commit's record is in the group's
	// __consumer_offsets partition: of a plain and a transactional commit
	// of the same partition, the later record wins, whichever is decided
	// last (txn_offsets.go).
	logOffset int64
}

type member struct {
	id         string
	instanceID *string
	clientID   string
	clientHost string

	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []byte

	// joinReply is set while the member waits in JoinGroup, syncReply
	// while it waits in SyncGroup; both are buffered so the loop never
	// blocks on a caller that went away.
	joinReply   chan *kmsg.JoinGroupResponse
	joinVersion int16
	syncReply   chan *kmsg.SyncGroupResponse
	syncVersion int16

	lastHeartbeat time.Time
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || string(ps[i].Metadata) != string(m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// summary is what ListGroups needs, published by the loop.
type summary struct {
	state        string // the classic or the consumer group's state
	protocolType string
	groupType    string // "classic" or "consumer"
	members      int
}

// group is one consumer group, owned by its run goroutine.
type group struct {
	id string
	c  *Coordinator

	reqs    chan func()
	quit    chan struct{}
	stopped chan struct{}
	pub     atomic.Pointer[summary]
	// stopCode is what requests get once the group stopped: 0 for a
	// deleted group (callers answer as for an unknown one), else the
	// code of Close or UnloadPartition. Written before quit is closed
	// and read only after stopped is, which orders the two.
	stopCode int16

	// Owned by run.
	state        State
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string    // instance id -> member id
	pending      map[string]time.Time // KIP-394 member ids -> rejoin deadline
	offsets      map[string]map[int32]offset
	txn          txnOffsets // offsets of open transactions (txn_offsets.go)
	// cg is set while the group speaks the consumer protocol (KIP-848);
	// the classic fields above are then unused but for state, which
	// mirrors whether it has members.
	cg         *consumerGroup
	stateSince time.Time // when the group entered its state (Kafka's currentStateTimestamp)
	hadMembers bool      // a group that only ever stored offsets expires by commit time

	rebalanceDeadline time.Time // PreparingRebalance completes by then
	initialDelayUntil time.Time // first rebalance of an empty group waits until then
	initialDelayCap   time.Time

	timer *time.Timer
}

func newGroup(c *Coordinator, id string) *group {
	g := &group{
		id: id, c: c,
		reqs:    make(chan func()),
		quit:    make(chan struct{}),
		stopped: make(chan struct{}),
		state:   Empty,
		members: map[string]*member{},
		static:  map[string]string{},
		pending: map[string]time.Time{},
		offsets: map[string]map[int32]offset{},
		timer:   time.NewTimer(time.Hour),
	}
	g.stateSince = c.now()
	g.publish()
	return g
}

func (g *group) run() {
	defer close(g.stopped)
	defer g.timer.Stop()
	for {
		select {
		case f := <-g.reqs:
			f() // publishes itself (do)
		case <-g.timer.C:
			g.onTimer(g.c.now())
			g.publish()
		case <-g.quit:
			g.failWaiters()
			return
		}
		g.resetTimer()
	}
}

// do runs f on the group's loop and waits for it; false means the group
// stopped (deleted, unloaded or coordinator closed) before f ran. What f
// changed is published before do returns, so that a ListGroups after a
// client's request sees the group as that request left it.
func (g *group) do(f func()) bool {
	done := make(chan struct{})
	select {
	case g.reqs <- func() { f(); g.publish(); close(done) }:
		<-done
		return true
	case <-g.stopped:
		return false
	}
}

func (g *group) publish() {
	if g.cg != nil && g.state != Dead {
		g.pub.Store(&summary{state: string(g.cg.state()), protocolType: "consumer", groupType: "consumer", members: len(g.cg.members)})
		return
	}
	g.pub.Store(&summary{state: string(g.state), protocolType: g.protocolType, groupType: "classic", members: len(g.members)})
}

func (g *group) transition(s State) {
	if g.state != s {
		g.state = s
		g.stateSince = g.c.now()
	}
}

// resetTimer arms the timer for the earliest deadline the group has.
func (g *group) resetTimer() {
	next := time.Time{}
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if g.state == PreparingRebalance {
		consider(g.rebalanceDeadline)
		consider(g.initialDelayUntil)
	}
	for _, m := range g.members {
		if m.joinReply == nil {
			consider(m.lastHeartbeat.Add(m.sessionTimeout))
		}
	}
	for _, deadline := range g.pending {
		consider(deadline)
	}
	if g.cg != nil {
		g.consumerDeadlines(consider)
	}
	if !g.timer.Stop() {
		select {
		case <-g.timer.C:
		default:
		}
	}
	if next.IsZero() {
		return
	}
	g.timer.Reset(max(time.Until(next), time.Millisecond))
}

func (g *group) onTimer(now time.Time) {
	if g.cg != nil {
		g.expireConsumerMembers(now)
		return
	}
	for id, deadline := range g.pending {
		if !now.Before(deadline) {
			delete(g.pending, id)
		}
	}
	var expired bool
	for _, m := range g.members {
		if m.joinReply == nil && !now.Before(m.lastHeartbeat.Add(m.sessionTimeout)) {
			g.c.logger.Info("group member session expired", "group", g.id, "member", m.id, "session_timeout", m.sessionTimeout)
			g.removeMember(m, kerr.UnknownMemberID.Code)
			expired = true
		}
	}
	switch {
	case g.state == PreparingRebalance:
		g.tryCompleteJoin(now)
	case expired:
		g.prepareRebalance(now, "member session expired")
	}
}

// stop ends the loop; only whoever took g out of the coordinator's table
// calls it, once.
func (g *group) stop(code int16) {
	g.stopCode = code
	close(g.quit)
}

// stopErr is the code for a request that found the group stopped (do
// returned false); deleted is the code when the group was deleted.
func (g *group) stopErr(deleted int16) int16 {
	if g.stopCode != 0 {
		return g.stopCode
	}
	return deleted
}

// failWaiters answers every parked request when the group stops.
func (g *group) failWaiters() {
	code := g.stopErr(kerr.CoordinatorNotAvailable.Code)
	for _, m := range g.members {
		g.replyJoinError(m, code)
		g.replySyncError(m, code)
	}
}

func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:4]) + "-" + hex.EncodeToString(b[4:6]) + "-" + hex.EncodeToString(b[6:8]) + "-" + hex.EncodeToString(b[8:10]) + "-" + hex.EncodeToString(b[10:])
	return memberIDPrefix(clientID) + "-" + id
}

func (g *group) isEmpty() bool {
	return len(g.members) == 0 && (g.cg == nil || len(g.cg.members) == 0)
}

// removeMember drops a member; a parked JoinGroup or SyncGroup of it is
// answered with code.
func (g *group) removeMember(m *member, code int16) {
	g.replyJoinError(m, code)
	g.replySyncError(m, code)
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

func (g *group) replyJoinError(m *member, code int16) {
	if m.joinReply == nil {
		return
	}
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = m.joinVersion
	resp.ErrorCode, resp.MemberID, resp.Generation = code, m.id, -1
	m.joinReply <- resp
	m.joinReply = nil
}

func (g *group) replySyncError(m *member, code int16) {
	if m.syncReply == nil {
		return
	}
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = m.syncVersion
	resp.ErrorCode = code
	m.syncReply <- resp
	m.syncReply = nil
}
