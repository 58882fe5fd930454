package kafka

// FindCoordinator, v0-v6.
//
// Behaviour:
//   - Group keys (type 0): the broker hosting the group's partition of
//     __consumer_offsets, at its address on the listener the request
//     arrived on (COORDINATOR_NOT_AVAILABLE when it is not live or has no
//     such listener, as in Kafka).
//   - v4+ batches keys (KIP-699): one entry per key, each with its own
//     error; v0-v3 carry one key in top-level fields.
//   - Transaction keys (type 1): the broker leading the transactional
//     id's partition of __transaction_state, which the first such request
//     creates (COORDINATOR_NOT_AVAILABLE until it has leaders, as in
//     Kafka). Other types INVALID_REQUEST.
//   - Authorization: DESCRIBE on the group, per key, else
//     GROUP_AUTHORIZATION_FAILED for that key; DESCRIBE on the
//     transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleFindCoordinator(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	auth := c.authorizer()
	find := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID = key, -1
		var code int16
		switch {
		case req.CoordinatorType == 1 && !auth.transactionalID(kmsg.ACLOperationDescribe, key):
			code = kerr.TransactionalIDAuthorizationFailed.Code
		case req.CoordinatorType > 1:
			code = kerr.InvalidRequest.Code
		case req.CoordinatorType == 0 && !auth.group(kmsg.ACLOperationDescribe, key):
			code = kerr.GroupAuthorizationFailed.Code
		default:
			lookup := s.cluster.GroupCoordinator
			if req.CoordinatorType == 1 {
				lookup = s.txns.TransactionCoordinator
			}
			bi, err := lookup(key)
			if err != nil {
				code = errorCode(err)
				break
			}
			bi, ok := c.reachable(bi)
			if !ok {
				code = kerr.CoordinatorNotAvailable.Code
				break
			}
			co.NodeID, co.Host, co.Port = bi.NodeID, bi.Host, bi.Port
		}
		co.ErrorCode = code
		return co
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, find(key))
		}
		return resp, nil
	}
	co := find(req.CoordinatorKey)
	resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.NodeID, co.Host, co.Port
	return resp, nil
}
