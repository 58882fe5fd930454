package kafka

// EndTxn, v0-v5.
//
// Behaviour: commits or aborts the producer's transaction at its
// coordinator (broker/txn): the decision is written, then the markers and
// the completed state. The answer waits for them (at most endTxnWait), so
// that the producer's next transaction does not start while markers are
// still being written (Kafka answers at once and the next AddPartitionsToTxn
// retries CONCURRENT_TRANSACTIONS). A retry gets CONCURRENT_TRANSACTIONS
// while the markers are being written and NONE once they are; the other
// outcome is INVALID_TXN_STATE. It needs WRITE
// on the transactional id. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// before v2. v5's next producer id and epoch (transaction version 2) are
// -1: weir does not advertise transaction.version 2, so clients bump no
// epoch per transaction.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleEndTxn(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	auth := c.authorizer()
	if !auth.transactionalID(kmsg.ACLOperationWrite, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	coord, err := s.txns.Transactions()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	code, done := coord.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version)
	resp.ErrorCode = code
	if done != nil {
		// Answered once the markers are written, within a bound: the
		// producer's next transaction then finds this one complete.
		timer := time.NewTimer(endTxnWait)
		select {
		case <-done:
		case <-timer.C:
		case <-c.ctx.Done():
		}
		timer.Stop()
	}
	return resp, nil
}

// endTxnWait bounds how long EndTxn's answer waits for the markers.
const endTxnWait = 5 * time.Second
