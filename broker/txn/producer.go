package txn

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProducerID is what InitProducerId answers.
type ProducerID struct {
	ID    int64
	Epoch int16
	Code  int16
}

// epochExhausted is the epoch past which a producer id is not bumped: a
// new id starts at epoch 0 instead (Kafka keeps Short.MAX_VALUE free).
const epochExhausted = math.MaxInt16 - 1

// InitProducerID gives transactional id its producer id and epoch (Kafka's
// handleInitProducerId, transaction version 1). reqID and reqEpoch are the
// ones a producer recovering from an error still holds (KIP-360), both -1
// otherwise. version is the request's, for its fencing code.
//
// The pair before the latest bump is remembered only when the producer
// asked for the bump with its own pair: a retry of that call gets the
// current pair again. A bump asked without a pair is a new producer
// fencing the old one, which must then not get the new epoch back by
// presenting its old pair; nor may the producer fenced by a transaction
// timeout or by a new producer's abort of its transaction.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, reqID int64, reqEpoch int16, version int16) ProducerID {
	fail := func(e *kerr.Error) ProducerID { return ProducerID{ID: -1, Epoch: -1, Code: e.Code} }
	if id == "" {
		return fail(kerr.InvalidRequest)
	}
	expected := reqID != -1 || reqEpoch != -1
	if expected && (reqID == -1 || reqEpoch == -1) {
		return fail(kerr.InvalidRequest) // half a pair, as Kafka refuses it
	}
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.opts.Settings().MaxTimeout {
		return fail(kerr.InvalidTransactionTimeout)
	}
	e, gen, code := c.lock(id, true)
	if code != 0 {
		return ProducerID{ID: -1, Epoch: -1, Code: code}
	}
	defer e.mu.Unlock()
	st := e.st
	if !e.exists || st.status == kmsg.TransactionStateDead {
		pid, err := c.opts.NewProducerID(ctx)
		if err != nil {
			c.logger.Warn("allocating a producer id", "transactional_id", id, "err", err)
			return fail(kerr.CoordinatorNotAvailable)
		}
		st = state{producerID: pid, producerEpoch: -1, lastProducerID: -1, lastEpoch: -1, status: kmsg.TransactionStateEmpty}
	}
	switch st.status {
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort, kmsg.TransactionStatePrepareEpochFence:
		return fail(kerr.ConcurrentTransactions)
	}
	if expected {
		switch {
		case st.producerEpoch < 0:
			// No producer holds this id's state (it is new, or it
			// expired): one recovering with a pair from before gets the
			// new producer id, as in Kafka.
		case reqID == st.producerID && reqEpoch == st.producerEpoch:
		case reqID == st.lastProducerID && reqEpoch == st.lastEpoch && st.status != kmsg.TransactionStateOngoing:
			// A retry of the bump that gave the current ones.
			return ProducerID{ID: st.producerID, Epoch: st.producerEpoch}
		default:
			return fail(fenced(version, 4))
		}
	}
	now := c.now().UnixMilli()
	if st.status == kmsg.TransactionStateOngoing {
		// The producer that opened it is fenced: the epoch moves on and
		// its transaction is aborted; the caller retries once that is
		// done (Kafka answers the same).
		next := st
		next.producerEpoch = min(st.producerEpoch+1, math.MaxInt16)
		next.lastEpoch = -1
		next.status, next.updateMs = kmsg.TransactionStatePrepareAbort, now
		if code := c.write(e, gen, next); code != 0 {
			return ProducerID{ID: -1, Epoch: -1, Code: code}
		}
		c.complete(e, gen)
		return fail(kerr.ConcurrentTransactions)
	}
	next := st
	next.lastProducerID, next.lastEpoch = st.producerID, -1
	if expected {
		next.lastEpoch = st.producerEpoch
	}
	if st.producerEpoch >= epochExhausted {
		pid, err := c.opts.NewProducerID(ctx)
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
		next.producerID, next.producerEpoch = pid, 0
	} else {
		next.producerEpoch = st.producerEpoch + 1
	}
	next.timeoutMs, next.status, next.partitions = timeoutMs, kmsg.TransactionStateEmpty, nil
	next.updateMs, next.startMs = now, -1
	if code := c.write(e, gen, next); code != 0 {
		return ProducerID{ID: -1, Epoch: -1, Code: code}
	}
	return ProducerID{ID: next.producerID, Epoch: next.producerEpoch}
}

// fenced is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for request
// versions before since, which predate the code (Kafka's mapping).
func fenced(version, since int16) *kerr.Error {
	if version < since {
		return kerr.InvalidProducerEpoch
	}
	return kerr.ProducerFenced
}

// check finds the producer's transaction: the entry locked, or the code.
// A producer id the id does not hold is INVALID_PRODUCER_ID_MAPPING, an
// older epoch fenced (fencedSince: the first request version with
// PRODUCER_FENCED).
func (c *Coordinator) check(id string, pid int64, epoch int16, version, fencedSince int16) (*entry, uint64, int16) {
	e, gen, code := c.lock(id, false)
	switch {
	case code != 0:
		return nil, 0, code
	case e == nil:
		return nil, 0, kerr.InvalidProducerIDMapping.Code
	case !e.exists || e.st.producerID != pid || e.st.status == kmsg.TransactionStateDead:
		e.mu.Unlock()
		return nil, 0, kerr.InvalidProducerIDMapping.Code
	case e.st.producerEpoch != epoch:
		e.mu.Unlock()
		return nil, 0, fenced(version, fencedSince).Code
	}
	return e, gen, 0
}
