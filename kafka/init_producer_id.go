package kafka

// InitProducerId, v0-v5.
//
// Behaviour:
//   - Without a transactional id: a new producer id at epoch 0, unique for
//     the life of the cluster (ids are reserved durably in blocks). A
//     producer re-initialising (v3+ with its old id) also gets a new id,
//     which restarts its sequences cleanly.
//   - With a transactional id: the transaction coordinator's answer
//     (broker/txn: epoch bump, fencing of an older producer of the id,
//     KIP-360 recovery with the id and epoch the producer holds; a
//     pair with only one of them set is INVALID_REQUEST). It
//     needs WRITE on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED; PRODUCER_FENCED is
//     INVALID_PRODUCER_EPOCH before v4.
//   - Authorization of an idempotent producer (KIP-679): IDEMPOTENT_WRITE
//     on the cluster, or WRITE on some topic, else
//     CLUSTER_AUTHORIZATION_FAILED. Kafka asks whether any ACL could
//     allow WRITE on a topic; weir asks of the topics that exist, so a
//     producer whose only grant is a prefix no topic has yet needs the
//     topic created first, or IDEMPOTENT_WRITE.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleInitProducerID(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	auth := c.authorizer()
	if id := req.TransactionalID; id != nil {
		if !auth.transactionalID(kmsg.ACLOperationWrite, *id) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		}
		coord, err := s.txns.Transactions()
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return resp, nil
		}
		r := coord.InitProducerID(c.ctx, *id, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch, req.Version)
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = r.ID, r.Epoch, r.Code
		return resp, nil
	}
	if !auth.clusterQuietly(kmsg.ACLOperationIdempotentWrite) && !auth.someTopic(kmsg.ACLOperationWrite) {
		c.logger.Debug("request not authorized", "principal", auth.principal, "host", auth.host,
			"operation", "IDEMPOTENT_WRITE on the cluster or WRITE on a topic")
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	id, epoch, err := s.records.InitProducerID()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}
