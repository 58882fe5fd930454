package chaos

import (
	"context"
	"fmt"
	"time"
)

// Fault kinds aimed at the transactional workload.
const (
	FaultKillTxnCoordinator    = "kill -9 txn coordinator"
	FaultPauseTxnCoordinator   = "SIGSTOP/SIGCONT txn coordinator"
	FaultIsolateTxnCoordinator = "partition: isolate txn coordinator"
	FaultKillOutputLeader      = "kill -9 txn output partition leader"
)

// TxnFaultKinds are the kinds a nemesis with TxnTargets adds (the
// isolation only where the network allows partitions).
func TxnFaultKinds() []string {
	return []string{FaultKillTxnCoordinator, FaultPauseTxnCoordinator, FaultIsolateTxnCoordinator, FaultKillOutputLeader}
}

// transactionStateTopic is the broker's internal topic of transaction
// coordinator state.
const transactionStateTopic = "__transaction_state"

// TxnTargets is what the transactional faults aim at.
type TxnTargets struct {
	TransactionalIDs []string
	Output           string
	Partitions       int32
	// Topics are the workload's topics, which must be healthy again
	// before the next fault.
	Topics []string
}

func (nm *Nemesis) txnKinds() []string {
	if nm.Txn == nil {
		return nil
	}
	kinds := []string{FaultKillTxnCoordinator, FaultPauseTxnCoordinator, FaultKillOutputLeader}
	if nm.c.Net.CanPartition() {
		kinds = append(kinds, FaultIsolateTxnCoordinator)
	}
	return kinds
}

// healthTopics are the topics the nemesis waits to be healthy after a
// fault.
func (nm *Nemesis) healthTopics() []string {
	topics := []string{nm.topic}
	if nm.Txn != nil {
		topics = append(topics, nm.Txn.Topics...)
		topics = append(topics, transactionStateTopic)
	}
	return topics
}

// txnCoordinatorTarget draws a worker and finds its transaction
// coordinator.
func (nm *Nemesis) txnCoordinatorTarget(ctx context.Context) (int, string, error) {
	id := nm.Txn.TransactionalIDs[nm.rng.IntN(len(nm.Txn.TransactionalIDs))]
	node, err := nm.c.TxnCoordinator(ctx, id)
	return node, "coordinator of " + id, err
}

// injectTxn applies one of the transactional fault kinds, holds it and
// undoes it.
func (nm *Nemesis) injectTxn(ctx context.Context, kind string, hold time.Duration) error {
	if nm.Txn == nil {
		return fmt.Errorf("fault kind %q without transactional targets", kind)
	}
	var target int
	var what string
	var err error
	switch kind {
	case FaultKillTxnCoordinator, FaultPauseTxnCoordinator, FaultIsolateTxnCoordinator:
		target, what, err = nm.txnCoordinatorTarget(ctx)
	case FaultKillOutputLeader:
		p := int32(nm.rng.IntN(int(nm.Txn.Partitions)))
		target, err = nm.c.PartitionLeader(ctx, nm.Txn.Output, p)
		what = fmt.Sprintf("leader of %s/%d", nm.Txn.Output, p)
	default:
		return fmt.Errorf("unknown fault kind %q", kind)
	}
	if err != nil {
		return err
	}
	n := nm.c.Nodes[target]
	switch kind {
	case FaultKillTxnCoordinator, FaultKillOutputLeader:
		if err := n.Kill(); err != nil {
			return err
		}
		nm.Counts[kind]++
		nm.event("%s: node %d (%s), down for %v", kind, target, what, hold.Round(100*time.Millisecond))
		sleepCtx(ctx, hold)
		return nm.restart(ctx, n)
	case FaultPauseTxnCoordinator:
		if err := n.Pause(); err != nil {
			return err
		}
		nm.Counts[kind]++
		nm.event("%s: node %d (%s) paused for %v", kind, target, what, hold.Round(100*time.Millisecond))
		sleepCtx(ctx, hold)
		return n.Resume()
	default: // FaultIsolateTxnCoordinator
		var peers []int
		for _, other := range nm.c.Nodes {
			if other.ID != target {
				peers = append(peers, other.ID)
			}
		}
		if err := nm.cut(target, peers...); err != nil {
			return err
		}
		nm.Counts[kind]++
		nm.event("%s: node %d (%s) cut from nodes %v for %v", kind, target, what, peers, hold.Round(100*time.Millisecond))
		sleepCtx(ctx, hold)
		return nm.healCuts()
	}
}
