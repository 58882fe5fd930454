package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/memory"
	"github.com/weir-broker/weir/raft"
)

// Proposing to a partition's Raft group and waiting for the outcome:
// what every write of a partition (produce, transaction markers, deletes)
// goes through on its leader.

// replicate proposes an entry to the partition's group and waits until
// it is committed and applied here: acknowledged writes are on a
// majority's disks.
func (p *Partition) replicate(ctx context.Context, entry []byte) (applyResult, error) {
	pe, err := p.propose(ctx, entry)
	if err != nil {
		return applyResult{}, err
	}
	return pe.wait(ctx)
}

// proposedEntry is an entry in the partition group's log queue.
type proposedEntry struct {
	p    *Partition
	prop raft.Proposal
	// recycle, when set, takes the entry's buffer back once the entry
	// was applied here (ProducePath.newAppendEntry).
	recycle *memory.Buffers
	data    []byte
}

// propose hands an entry to the partition's group without waiting for
// its commit; entries proposed one after the other by one goroutine are
// applied in that order.
func (p *Partition) propose(ctx context.Context, entry []byte) (proposedEntry, error) {
	prop, err := p.group.Propose(ctx, entry)
	if err != nil {
		return proposedEntry{}, p.replicationError(err)
	}
	return proposedEntry{p: p, prop: prop}, nil
}

// wait returns the entry's outcome once it is committed and applied here.
// Once the apply here has returned, nothing holds the entry any more:
// Raft's leader dropped it from its queue before the apply, its log store
// wrote it before the commit, and its followers are sent entries read
// back from that store. An entry whose outcome is unknown (the wait
// ended first, leadership was lost) may still be written or applied, and
// is left to the collector.
func (pe proposedEntry) wait(ctx context.Context) (applyResult, error) {
	resp, _, err := pe.prop.Wait(ctx)
	return pe.outcome(resp, err)
}

// then calls fn with the entry's outcome, as wait returns it, once it is
// known: on the goroutine that learns it (raft.Proposal.Then), so fn must
// not block. It is wait for a caller that answers many entries without a
// goroutine each.
func (pe proposedEntry) then(fn func(applyResult, error)) {
	pe.prop.Then(func(o raft.Outcome) { fn(pe.outcome(o.Response, o.Err)) })
}

// outcome is the entry's result from its proposal's outcome; an entry
// applied here gives its buffer back.
func (pe proposedEntry) outcome(resp any, err error) (applyResult, error) {
	if err != nil {
		return applyResult{}, pe.p.replicationError(err)
	}
	if pe.recycle != nil {
		pe.recycle.Recycle(pe.data)
	}
	res, ok := resp.(applyResult)
	if !ok {
		return applyResult{}, fmt.Errorf("%w: %s/%d: unexpected apply result %T", kerr.UnknownServerError, pe.p.topic.Name(), pe.p.Index, resp)
	}
	return res, res.err
}

// replicationError is the Kafka error for an entry the group did not
// commit.
func (p *Partition) replicationError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrShutdown):
		return fmt.Errorf("%w: %s/%d: %v", kerr.NotLeaderForPartition, p.topic.Name(), p.Index, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		// It may still commit; the client's retry is recognised by its
		// sequence numbers if it is idempotent.
		return fmt.Errorf("%w: %s/%d: leadership lost before commit", kerr.NotLeaderForPartition, p.topic.Name(), p.Index)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %s/%d: not committed in time", kerr.RequestTimedOut, p.topic.Name(), p.Index)
	}
	return fmt.Errorf("%w: %s/%d: %v", kerr.KafkaStorageError, p.topic.Name(), p.Index, err)
}
