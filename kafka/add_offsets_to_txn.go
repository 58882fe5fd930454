package kafka

// AddOffsetsToTxn, v0-v4.
//
// Behaviour: the group's partition of __consumer_offsets joins the
// producer's transaction, so that offsets it commits with
// TxnOffsetCommit are settled by the transaction's marker. It needs WRITE
// on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
// and READ on the group (else GROUP_AUTHORIZATION_FAILED).
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleAddOffsetsToTxn(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	auth := c.authorizer()
	switch {
	case !auth.transactionalID(kmsg.ACLOperationWrite, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case !auth.group(kmsg.ACLOperationRead, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	coord, err := s.txns.Transactions()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	resp.ErrorCode = coord.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Version)
	return resp, nil
}
