package kafka

// InitProducerId, v0-v5.
//
// Behaviour:
//   - Without a transactional id: a new producer id at epoch 0, unique for
//     the life of the cluster (ids are reserved durably in blocks). A
//     producer re-initialising (v3+ with its old id) also gets a new id,
//     which restarts its sequences cleanly.
//   - With a transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED —
//     transactions are not implemented, and clients treat that code as
//     fatal rather than retrying forever.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleInitProducerID(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	id, epoch, err := s.broker.InitProducerID()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}
