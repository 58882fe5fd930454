package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Server is one member of a group's configuration.
type Server struct {
	ID    string
	Addr  string // the member's Mux address (rpc_addr)
	Voter bool
}

// Group is one Raft group running on this node.
type Group struct {
	name  string
	id    string
	class string
	mux   *Mux
	log   *slog.Logger
	raft  *hraft.Raft
	trans *groupTransport
	store *groupStore
	// existing is whether the group had state on disk when it started:
	// such a group never bootstraps again.
	existing bool

	observer *hraft.Observer
	leaderCh chan bool // capacity 1, latest value wins; written by checkLeadership only

	leadMu   sync.Mutex // leadership.go: the fields below and calls to onLeader
	onLeader LeaderFunc
	leading  bool // what the owner was last told
	// timers by role (Config.LeaderHeartbeatTimeout); zero: one for both
	leaderHT, followerHT, electionTO time.Duration
	mustTell                         bool // a new onLeader is told the current leadership
	stopped                          bool // Shutdown ran: nobody is told anything any more

	// catchUpAt and catchUpWait pace the barriers that wake a stalled
	// follower's replication (catchup.go); the leadership goroutine's own.
	catchUpAt   time.Time
	catchUpWait time.Duration

	// leaderConf is the configuration last read while leading.
	leaderConf atomic.Pointer[keptConfiguration]

	// notifying: a NotifyFollowers request is pending
	notifying atomic.Bool
	// leaderChanges counts the leaders this member observed
	// (weir_raft_leader_changes_total).
	leaderChanges atomic.Uint64

	// outcomes learns what became of the group's proposals (proposal.go).
	outcomes outcomes

	done     chan struct{} // closed by Shutdown
	wg       sync.WaitGroup
	shutOnce sync.Once
	shutErr  error
}

// Start opens (or creates) the group's state under cfg.Dir and starts its
// Raft instance on this mux: its log and term/vote in the node's shared
// log (store.go), its RPCs on the node's shared transport. A brand-new
// group then needs Bootstrap (on every initial member, with the same
// servers) or to be added by the leader of an existing configuration; a
// group with state on disk rejoins on its own.
func (m *Mux) Start(cfg Config) (*Group, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := notRPCStream(cfg.Group); err != nil {
		return nil, err
	}
	rc, err := cfg.raftConfig()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = m.log
	}
	logger = logger.With("raft_group", cfg.Group)
	hl := newGroupHCLog(logger, "raft", m.peerLogs)
	rc.Logger = hl

	g := &Group{
		name: cfg.Group, id: cfg.NodeID, class: cfg.Class, mux: m, log: logger,
		leaderHT: cfg.LeaderHeartbeatTimeout, followerHT: cfg.HeartbeatTimeout, electionTO: cfg.ElectionTimeout,
		leaderCh: make(chan bool, 1),
		done:     make(chan struct{}),
	}
	// Register the name first: a second Start of a running group must fail
	// here, before it touches the first one's state.
	if g.trans, err = m.groupTransport(cfg.Group, TransportOptions{Timeout: cfg.TransportTimeout, Delay: cfg.transportDelay()}); err != nil {
		return nil, err
	}
	if g.store, err = m.openGroupStore(cfg.Dir, cfg.Group, hl); err != nil {
		g.trans.Close()
		return nil, err
	}
	if g.existing, err = g.store.hasState(); err != nil {
		g.trans.Close()
		return nil, err
	}
	logs := &groupLog{GroupStore: g.store.log, obs: cfg.LogObserver}
	g.raft, err = hraft.NewRaft(rc, newFSM(cfg.StateMachine), logs, g.store.log, g.store.snaps, g.trans)
	if err != nil {
		g.trans.Close()
		return nil, fmt.Errorf("raft: starting group %s: %w", cfg.Group, err)
	}
	logs.raft.Store(g.raft)
	g.trans.setAppliedSource(g.raft.AppliedIndex)
	g.observer = hraft.NewObserver(m.obsCh, false, func(o *hraft.Observation) bool {
		_, ok := o.Data.(hraft.LeaderObservation)
		return ok
	})
	if err := m.addGroup(g); err != nil {
		g.Shutdown()
		return nil, err
	}
	return g, nil
}

func (m *Mux) addGroup(g *Group) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrShutdown
	}
	m.groups[g.name] = g
	m.byRaft[g.raft] = g
	// Registered once the dispatcher can find the group: an observation
	// of an unknown Raft is dropped.
	g.raft.RegisterObserver(g.observer)
	return nil
}

func (m *Mux) removeGroup(g *Group) {
	m.mu.Lock()
	if m.groups[g.name] == g {
		delete(m.groups, g.name)
	}
	if m.byRaft[g.raft] == g {
		delete(m.byRaft, g.raft)
	}
	m.mu.Unlock()
}

// Name is the group's name.
func (g *Group) Name() string { return g.name }

// Bootstrap writes the group's first configuration. Call it on a brand-new
// group only, on each initial member with the same servers. A group that
// started with state on disk returns ErrExistingState and is left alone:
// bootstrapping a restarted node again could fork the group.
func (g *Group) Bootstrap(servers []Server) error {
	if g.existing {
		return fmt.Errorf("group %s: %w", g.name, ErrExistingState)
	}
	conf := hraft.Configuration{Servers: make([]hraft.Server, 0, len(servers))}
	for _, s := range servers {
		conf.Servers = append(conf.Servers, toRaftServer(s))
	}
	err := g.raft.BootstrapCluster(conf).Error()
	if errors.Is(err, hraft.ErrCantBootstrap) {
		return fmt.Errorf("group %s: %w", g.name, ErrExistingState)
	}
	return g.translate(err)
}

// campaignWait bounds how long Campaign waits for the group's main loop
// to take its request.
const campaignWait = 5 * time.Second

// Campaign makes this member stand for election now instead of after a
// heartbeat timeout without a leader: a brand-new group's preferred
// leader calls it right after Bootstrap, so new partitions have leaders
// in milliseconds although the timers are sized for thousands of idle
// groups. It hands the group the request a leader sends when it
// transfers leadership (TimeoutNow), through the group's own transport,
// so Raft treats it as it treats that one: the member becomes a
// candidate in the next term and asks for votes at once. Elections are
// safe whoever starts them; this only decides when. It returns at once.
func (g *Group) Campaign() {
	rpc := hraft.RPC{
		Command:  &hraft.TimeoutNowRequest{RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(g.id), Addr: []byte(g.mux.Addr())}},
		RespChan: make(chan hraft.RPCResponse, 1),
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		t := time.NewTimer(campaignWait)
		defer t.Stop()
		select {
		case g.trans.consumeCh <- rpc:
		case <-g.done:
		case <-t.C:
			g.log.Warn("raft group did not take the request to campaign", "waited", campaignWait)
		}
	}()
}

// NotifyFollowers makes a leading group heartbeat its followers now
// rather than at its next interval (1.2–2.4 s for a partition). Heartbeats
// carry the commit index to followers that have not learned it (commit
// notices, transport_commit.go), so an owner that sees a follower lag the
// commit while no append is coming calls this to have it learn at once.
// It returns at once; at most one request is pending per group, and on a
// node that does not lead the group it does nothing.
func (g *Group) NotifyFollowers() {
	if !g.notifying.CompareAndSwap(false, true) {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.notifying.Store(false)
		// The future is not waited for: the heartbeats are what is
		// wanted, not the confirmation of leadership they bring.
		g.raft.VerifyLeader()
	}()
}

// HasExistingState reports whether the group found state on disk at Start.
func (g *Group) HasExistingState() bool { return g.existing }

// Barrier returns once every entry committed before it has been applied to
// the FSM on this node, which must lead the group: a new leader calls it
// before serving reads from its FSM.
func (g *Group) Barrier(ctx context.Context) error {
	timeout, err := ctxTimeout(ctx)
	if err != nil {
		return err
	}
	return g.translate(wait(ctx, g.raft.Barrier(timeout)))
}

// Snapshot asks Raft for a snapshot now (tests, operators before
// maintenance) instead of at the next SnapshotInterval check.
func (g *Group) Snapshot() error {
	return g.translate(g.raft.Snapshot().Error())
}

// Leader is the current leader's id and address as this node knows them;
// both are empty while there is none.
func (g *Group) Leader() (id, addr string) {
	a, i := g.raft.LeaderWithID()
	return string(i), string(a)
}

// LastContact is when this member last heard from its leader (zero:
// never, or it leads).
func (g *Group) LastContact() time.Time { return g.raft.LastContact() }

// IsLeader reports whether this node leads the group.
func (g *Group) IsLeader() bool { return g.raft.State() == hraft.Leader }

// LeaderChanges delivers this node's leadership (true: it became the
// leader, false: it no longer is) on every change. The channel holds only
// the latest value: a slow reader skips intermediate flips but always sees
// the current state. It is never closed. OnLeaderChange is the same
// without a goroutine waiting on a channel per group.
func (g *Group) LeaderChanges() <-chan bool { return g.leaderCh }

// Term is the current Raft term as this node knows it.
func (g *Group) Term() uint64 { return g.raft.CurrentTerm() }

// AppliedIndex is the last index applied to the FSM on this node.
func (g *Group) AppliedIndex() uint64 { return g.raft.AppliedIndex() }

// TransferLeadership hands leadership to another voter, which must be
// caught up; the leader stops taking commands until it is done. Leader
// only.
func (g *Group) TransferLeadership(id, addr string) error {
	return g.translate(g.raft.LeadershipTransferToServer(hraft.ServerID(id), hraft.ServerAddress(addr)).Error())
}

// AddVoter adds (or promotes) a voting member. Leader only.
func (g *Group) AddVoter(ctx context.Context, id, addr string) error {
	timeout, err := ctxTimeout(ctx)
	if err != nil {
		return err
	}
	return g.translate(wait(ctx, g.raft.AddVoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, timeout)))
}

// AddNonvoter adds a member that replicates but does not vote. Leader only.
func (g *Group) AddNonvoter(ctx context.Context, id, addr string) error {
	timeout, err := ctxTimeout(ctx)
	if err != nil {
		return err
	}
	return g.translate(wait(ctx, g.raft.AddNonvoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, timeout)))
}

// DemoteVoter makes a voting member a non-voter. Leader only.
func (g *Group) DemoteVoter(ctx context.Context, id string) error {
	timeout, err := ctxTimeout(ctx)
	if err != nil {
		return err
	}
	return g.translate(wait(ctx, g.raft.DemoteVoter(hraft.ServerID(id), 0, timeout)))
}

// RemoveServer removes a member. Leader only.
func (g *Group) RemoveServer(ctx context.Context, id string) error {
	timeout, err := ctxTimeout(ctx)
	if err != nil {
		return err
	}
	return g.translate(wait(ctx, g.raft.RemoveServer(hraft.ServerID(id), 0, timeout)))
}

// Configuration is the group's latest configuration as this node has it
// (possibly not yet committed). The slice may be shared with other
// callers: it must not be changed.
//
// A leader's answer is kept and given again while its term, last index
// and commit index stay the same: the broker asks every second for every
// partition it leads, and each fresh copy (hashicorp's future and clone,
// then this package's strings) was a fifth of an idle broker's
// allocation. A leader's configuration changes only by an entry it
// appends. hashicorp stores that entry (raising the last index) just
// before it sets the new configuration, so an answer read in between can
// be old under the new last index; but the entry's commit moves the
// commit index, and that comes after, on the same goroutine. A
// follower's is not kept: a conflict truncation can change its
// configuration and leave its indexes where they were.
func (g *Group) Configuration() ([]Server, error) {
	leading := g.raft.State() == hraft.Leader
	key := confKey{g.raft.CurrentTerm(), g.raft.LastIndex(), g.raft.CommitIndex()}
	if leading {
		if c := g.leaderConf.Load(); c != nil && c.key == key {
			return c.servers, nil
		}
	}
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, g.translate(err)
	}
	servers := f.Configuration().Servers
	out := make([]Server, 0, len(servers))
	for _, s := range servers {
		out = append(out, Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == hraft.Voter})
	}
	if leading {
		g.leaderConf.Store(&keptConfiguration{key: key, servers: out})
	}
	return out, nil
}

// keptConfiguration is a leader's configuration with the indexes it was
// read at (Group.Configuration).
type keptConfiguration struct {
	key     confKey
	servers []Server
}

type confKey struct{ term, last, commit uint64 }

// Shutdown stops the group on this node and removes it from the mux; its
// files stay for a later Start. Safe to call more than once.
func (g *Group) Shutdown() error {
	g.shutOnce.Do(func() {
		err := g.raft.Shutdown().Error()
		g.store.log.ReleaseHandOff()
		g.raft.DeregisterObserver(g.observer)
		g.leadMu.Lock()
		g.stopped = true
		g.leadMu.Unlock()
		close(g.done)
		g.wg.Wait()
		g.mux.removeGroup(g)
		// hashicorp/raft closes a transport that has Close when it shuts
		// down; closing it again here covers a failed start. Either way
		// only this group is detached from the node's connections.
		err = errors.Join(err, g.trans.Close())
		g.shutErr = err
	})
	return g.shutErr
}

func toRaftServer(s Server) hraft.Server {
	suf := hraft.Nonvoter
	if s.Voter {
		suf = hraft.Voter
	}
	return hraft.Server{Suffrage: suf, ID: hraft.ServerID(s.ID), Address: hraft.ServerAddress(s.Addr)}
}

// ctxTimeout turns ctx's deadline into hashicorp/raft's enqueue timeout
// (0: wait as long as it takes).
func ctxTimeout(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return 0, context.DeadlineExceeded
	}
	return d, nil
}

// wait waits for f or ctx. hashicorp's futures have no done channel, so a
// cancellable wait costs a goroutine; a context that can't end doesn't.
// Proposals, the frequent case, are waited for without one
// (proposal.go); this serves the rare rest.
func wait(ctx context.Context, f hraft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	ch := make(chan error, 1)
	go func() { ch <- f.Error() }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
