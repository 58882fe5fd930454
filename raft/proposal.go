package raft

import (
	"context"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Proposals and their outcomes.
//
// hashicorp/raft's futures have no channel to select on: learning a
// future's outcome takes a goroutine blocked in its Error. Rather than one
// such goroutine per proposal (and, for a caller that also waits on a
// context or a second event, a hand-off from it to that caller), a group
// learns the outcomes of its proposals on one goroutine, in the order they
// were proposed, which is the order hashicorp gives them: commits in log
// order; on a lost leadership the entries in flight, then the queued ones;
// nothing is answered out of turn. Each outcome goes on to the proposer's
// function (Then), on that goroutine, or to a channel a waiter selects on
// (Wait). The goroutine runs while proposals are outstanding and ends when
// none are, so a follower, or a leader nobody writes to, has none.
//
// A proposal hashicorp never answers — one still queued for the leader's
// loop when the group shuts down — holds the proposals behind it; their
// waiters end with their contexts, as they would have without the queue.

// Proposal is a command in the group's Raft log queue whose outcome is not
// known yet (Group.Propose).
type Proposal struct{ p *proposal }

// Outcome is what became of a proposal: what the FSM's Apply returned on
// this node and the entry's Raft index once it is committed and applied,
// or why it was not (Err; the command may still commit after
// ErrLeadershipLost).
type Outcome struct {
	Response any
	Index    uint64
	Err      error
}

type proposal struct {
	g     *Group
	f     hraft.ApplyFuture
	start time.Time

	mu      sync.Mutex
	settled bool
	out     Outcome // set once settled
	then    func(Outcome)
	waiting chan struct{} // closed once settled, for Wait
}

// outcomes is a group's queue of proposals whose outcomes are not known.
type outcomes struct {
	mu      sync.Mutex
	queue   []*proposal
	spare   []*proposal // the slice the running goroutine last emptied
	running bool
}

// Propose hands cmd to the group's log and returns without waiting for
// its commit: Apply is Propose then Wait. Commands proposed one after the
// other take their places in the log in that order, so a caller may
// propose several before waiting for the first, and one write and fsync
// of the log can cover them all (a group started with Config.BatchApply
// queues up to MaxAppendEntries of them while the leader writes; without
// it Propose returns once the leader took the command). ctx bounds the
// wait for room in the queue and, through Wait, the commit.
func (g *Group) Propose(ctx context.Context, cmd []byte) (Proposal, error) {
	timeout, err := ctxTimeout(ctx)
	if err != nil {
		return Proposal{}, err
	}
	select {
	case <-g.done:
		return Proposal{}, g.translate(hraft.ErrRaftShutdown)
	default:
	}
	p := &proposal{g: g, f: g.raft.Apply(cmd, timeout), start: time.Now()}
	g.outcomes.add(g, p)
	return Proposal{p}, nil
}

func (o *outcomes) add(g *Group, p *proposal) {
	o.mu.Lock()
	o.queue = append(o.queue, p)
	start := !o.running
	o.running = true
	o.mu.Unlock()
	if start {
		go o.settle(g)
	}
}

// settle learns the queued proposals' outcomes, oldest first, until none
// is left.
func (o *outcomes) settle(g *Group) {
	for {
		o.mu.Lock()
		batch := o.queue
		if len(batch) == 0 {
			o.running = false
			o.mu.Unlock()
			return
		}
		o.queue, o.spare = o.spare[:0], nil
		o.mu.Unlock()
		for i, p := range batch {
			p.settle()
			batch[i] = nil
		}
		o.mu.Lock()
		o.spare = batch[:0]
		o.mu.Unlock()
	}
}

// settle waits for the proposal's future and hands its outcome on.
func (p *proposal) settle() {
	err := p.f.Error()
	out := Outcome{Err: p.g.translate(err)}
	if err == nil {
		p.g.mux.metrics.observeCommit(p.g.class, time.Since(p.start))
		out.Response, out.Index = p.f.Response(), p.f.Index()
	}
	p.mu.Lock()
	p.settled, p.out = true, out
	then, waiting := p.then, p.waiting
	p.mu.Unlock()
	if waiting != nil {
		close(waiting)
	}
	if then != nil {
		then(out)
	}
}

// Then calls fn with the proposal's outcome once it is known: on the
// group's goroutine that learns outcomes, so fn must not block, or at once
// on the caller's if it is known already. Call it at most once; Wait may
// be called too.
func (p Proposal) Then(fn func(Outcome)) {
	p.p.mu.Lock()
	if p.p.settled {
		p.p.mu.Unlock()
		fn(p.p.out)
		return
	}
	p.p.then = fn
	p.p.mu.Unlock()
}

// Wait returns what the FSM's Apply returned on this node and the entry's
// Raft index once the proposal is committed and applied, or why it was
// not; ctx bounds the wait (the command may still commit after it ends).
func (p Proposal) Wait(ctx context.Context) (response any, index uint64, err error) {
	p.p.mu.Lock()
	if !p.p.settled && p.p.waiting == nil {
		p.p.waiting = make(chan struct{})
	}
	settled, waiting := p.p.settled, p.p.waiting
	p.p.mu.Unlock()
	if !settled {
		select {
		case <-waiting:
		case <-ctx.Done():
			return nil, 0, p.p.g.translate(ctx.Err())
		}
	}
	// Written before waiting was closed, or under mu: read-only now.
	out := p.p.out
	return out.Response, out.Index, out.Err
}

// Apply replicates cmd and returns what the FSM's Apply returned on this
// node (an error returned by the FSM comes back as the response, not as
// err) and the entry's Raft index. It fails with a *NotLeaderError unless
// this node leads the group. ctx bounds the wait; a command whose ctx ends
// after it was enqueued may still commit.
func (g *Group) Apply(ctx context.Context, cmd []byte) (response any, index uint64, err error) {
	p, err := g.Propose(ctx, cmd)
	if err != nil {
		return nil, 0, err
	}
	return p.Wait(ctx)
}
