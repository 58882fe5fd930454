package txn

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/group"
	"github.com/weir-broker/weir/log"
)

// GroupTopic is where AddOffsetsToTxn's partition lives.
const GroupTopic = "__consumer_offsets"

// AddPartitions adds partitions to the producer's transaction, opening it
// if none is (AddPartitionsToTxn v0-v3, and v4+ without verify-only).
// version is the request's (PRODUCER_FENCED from v2).
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, tps []TopicPartition, version int16) int16 {
	e, gen, code := c.check(id, pid, epoch, version, 2)
	if code != 0 {
		return code
	}
	defer e.mu.Unlock()
	switch e.st.status {
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort, kmsg.TransactionStatePrepareEpochFence:
		return kerr.ConcurrentTransactions.Code
	}
	open := e.st.status == kmsg.TransactionStateOngoing
	if open && hasAll(e.st, tps) {
		return 0
	}
	next := e.st.with(tps)
	now := c.now().UnixMilli()
	if !open {
		next.status, next.startMs = kmsg.TransactionStateOngoing, now
	}
	next.updateMs = now
	return c.write(e, gen, next)
}

func hasAll(st state, tps []TopicPartition) bool {
	for _, tp := range tps {
		if !st.has(tp) {
			return false
		}
	}
	return true
}

// VerifyPartitions answers AddPartitionsToTxn's verify-only form (KIP-890
// part 1, sent by partition leaders before they accept transactional
// data): per partition 0 when the producer's open transaction holds it,
// TRANSACTION_ABORTABLE when it does not. A producer id or epoch that
// does not match is one code for every partition.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TopicPartition) (map[TopicPartition]int16, int16) {
	e, _, code := c.check(id, pid, epoch, 5, 2)
	if code != 0 {
		return nil, code
	}
	defer e.mu.Unlock()
	switch e.st.status {
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort, kmsg.TransactionStatePrepareEpochFence:
		return nil, kerr.ConcurrentTransactions.Code
	}
	out := make(map[TopicPartition]int16, len(tps))
	for _, tp := range tps {
		if e.st.status != kmsg.TransactionStateOngoing || !e.st.has(tp) {
			out[tp] = kerr.TransactionAbortable.Code
		} else {
			out[tp] = 0
		}
	}
	return out, 0
}

// AddOffsets adds the group's partition of __consumer_offsets to the
// producer's transaction (AddOffsetsToTxn), so the transaction's offset
// commits are settled by its marker there.
func (c *Coordinator) AddOffsets(id string, pid int64, epoch int16, groupID string, version int16) int16 {
	tp := TopicPartition{Topic: GroupTopic, Partition: group.PartitionFor(groupID, c.opts.GroupPartitions())}
	return c.AddPartitions(id, pid, epoch, []TopicPartition{tp}, version)
}

// EndTxn commits or aborts the producer's transaction (EndTxn v0-v4):
// the prepared state is written, and the markers and the completed state
// follow. done, when not nil, is closed once they are: an answer given
// then spares the producer's next transaction the CONCURRENT_TRANSACTIONS
// retries of one that starts while markers are still being written
// (Kafka answers at once; either answer is NONE). A retry finds the
// transaction preparing (CONCURRENT_TRANSACTIONS) or complete (NONE); the
// other outcome than the one under way is INVALID_TXN_STATE.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool, version int16) (code int16, done <-chan struct{}) {
	e, gen, code := c.check(id, pid, epoch, version, 2)
	if code != 0 {
		return code, nil
	}
	defer e.mu.Unlock()
	prepare, complete := kmsg.TransactionStatePrepareAbort, kmsg.TransactionStateCompleteAbort
	if commit {
		prepare, complete = kmsg.TransactionStatePrepareCommit, kmsg.TransactionStateCompleteCommit
	}
	switch e.st.status {
	case kmsg.TransactionStateOngoing:
		next := e.st
		next.status, next.updateMs = prepare, c.now().UnixMilli()
		if code := c.write(e, gen, next); code != 0 {
			return code, nil
		}
		c.complete(e, gen)
		return 0, e.completed
	case complete:
		return 0, nil
	case prepare, kmsg.TransactionStatePrepareEpochFence:
		return kerr.ConcurrentTransactions.Code, nil
	}
	return kerr.InvalidTxnState.Code, nil
}

// Expire aborts the ongoing transactions that outlived their timeout,
// fencing their producers (the epoch moves on, as in Kafka), and removes
// ids idle past Settings.IDExpiration with no transaction open.
func (c *Coordinator) Expire() {
	now := c.now()
	c.mu.Lock()
	entries := make([]*entry, 0, len(c.ids))
	for _, e := range c.ids {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	idle := c.opts.Settings().IDExpiration
	for _, e := range entries {
		c.expire(e, now, idle)
	}
}

func (c *Coordinator) expire(e *entry, now time.Time, idle time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c.mu.Lock()
	gen, code := c.servingLocked(e.partition)
	mine := c.ids[e.id] == e
	c.mu.Unlock()
	if code != 0 || !mine || !e.exists {
		return
	}
	nowMs := now.UnixMilli()
	switch e.st.status {
	case kmsg.TransactionStateOngoing:
		if e.st.startMs+int64(e.st.timeoutMs) > nowMs {
			return
		}
		next := e.st
		next.producerEpoch = min(e.st.producerEpoch+1, math.MaxInt16)
		next.lastEpoch = -1 // the fenced producer gets no retry of a bump back
		next.status, next.updateMs = kmsg.TransactionStatePrepareAbort, nowMs
		if c.write(e, gen, next) == 0 {
			c.logger.Info("aborting a transaction past its timeout", "transactional_id", e.id, "producer_id", next.producerID, "timeout_ms", e.st.timeoutMs)
			c.complete(e, gen)
		}
	case kmsg.TransactionStateEmpty, kmsg.TransactionStateCompleteCommit, kmsg.TransactionStateCompleteAbort:
		if idle <= 0 || e.st.updateMs+idle.Milliseconds() > nowMs {
			return
		}
		_, err := c.opts.Store.Append(e.partition, []log.KeyValue{{Key: stateKey(e.id)}})
		if err != nil || !c.current(e.partition, gen) {
			return
		}
		c.mu.Lock()
		if c.ids[e.id] == e {
			delete(c.ids, e.id)
		}
		c.mu.Unlock()
		e.exists = false
	}
}
