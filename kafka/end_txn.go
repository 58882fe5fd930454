package kafka

// EndTxn, v0-v5.
//
// Behaviour: commits or aborts the producer's transaction at its
// coordinator (broker/txn): the decision is written and answered, then
// the markers and the completed state follow. A retry gets
// CONCURRENT_TRANSACTIONS while the markers are being written and NONE
// once they are; the other outcome is INVALID_TXN_STATE. It needs WRITE
// on the transactional id. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// before v2. v5's next producer id and epoch (transaction version 2) are
// -1: weir does not advertise transaction.version 2, so clients bump no
// epoch per transaction.

import (
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
	resp.ErrorCode = coord.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version)
	return resp, nil
}
