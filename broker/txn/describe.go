package txn

import (
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transaction is one transactional id as DescribeTransactions and
// ListTransactions show it.
type Transaction struct {
	ID        string
	State     kmsg.TransactionState
	TimeoutMs int32
	// StartMs is when the last transaction began (its first partition),
	// kept once it completes, as Kafka's txnStartTimestamp; -1 after
	// InitProducerId, before the producer's first transaction.
	StartMs       int64
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TopicPartition
}

// Describe returns id's transaction, or the code: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND.
func (c *Coordinator) Describe(id string) (Transaction, int16) {
	e, _, code := c.lock(id, false)
	if code != 0 {
		return Transaction{ID: id}, code
	}
	if e == nil {
		return Transaction{ID: id}, kerr.TransactionalIDNotFound.Code
	}
	defer e.mu.Unlock()
	if !e.exists {
		return Transaction{ID: id}, kerr.TransactionalIDNotFound.Code
	}
	return e.transaction(), 0
}

// e.mu is held.
func (e *entry) transaction() Transaction {
	return Transaction{ID: e.id, State: e.st.status, TimeoutMs: e.st.timeoutMs, StartMs: e.st.startMs,
		ProducerID: e.st.producerID, ProducerEpoch: e.st.producerEpoch, Partitions: e.st.partitions}
}

// open reports whether t is in a transaction: Ongoing, or ending.
func (t Transaction) open() bool {
	switch t.State {
	case kmsg.TransactionStateOngoing, kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
		return true
	}
	return false
}

// ListFilter selects transactions for List; zero fields select all.
type ListFilter struct {
	States      []kmsg.TransactionState
	ProducerIDs []int64
	// MinDurationMs keeps transactions open at least this long (KIP-994;
	// -1 or 0: any).
	MinDurationMs int64
	// IDPattern keeps ids matching it (a regular expression).
	IDPattern *regexp.Regexp
}

// List returns the transactions of every loaded partition that filter
// selects, by id.
func (c *Coordinator) List(filter ListFilter) []Transaction {
	c.mu.Lock()
	entries := make([]*entry, 0, len(c.ids))
	for _, e := range c.ids {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	nowMs := c.now().UnixMilli()
	var out []Transaction
	for _, e := range entries {
		e.mu.Lock()
		t, exists := e.transaction(), e.exists
		e.mu.Unlock()
		if exists && filter.selects(t, nowMs) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (f ListFilter) selects(t Transaction, nowMs int64) bool {
	if len(f.States) > 0 && !contains(f.States, t.State) {
		return false
	}
	if len(f.ProducerIDs) > 0 && !contains(f.ProducerIDs, t.ProducerID) {
		return false
	}
	if f.MinDurationMs > 0 && (!t.open() || t.StartMs < 0 || nowMs-t.StartMs < f.MinDurationMs) {
		return false
	}
	return f.IDPattern == nil || f.IDPattern.MatchString(t.ID)
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
