package kafka

// TxnOffsetCommit, v0-v4.
//
// Behaviour: the group's coordinator stores the offsets as part of the
// producer's transaction (broker/group/txn_offsets.go): written to
// __consumer_offsets at once, visible to OffsetFetch only once the
// transaction's COMMIT marker reaches the group's partition, dropped by
// an ABORT. Until then an OffsetFetch with require_stable gets
// UNSTABLE_OFFSET_COMMIT for those partitions. v3+ carry the member's
// generation, id and instance id (KIP-447), checked as OffsetCommit checks
// them. A producer fenced at the group's partition (a newer epoch wrote
// there) gets INVALID_PRODUCER_EPOCH, a moved partition NOT_COORDINATOR,
// as Kafka maps the failed write. Authorization: WRITE on the transactional id (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else
// GROUP_AUTHORIZATION_FAILED), READ on each topic (else
// TOPIC_AUTHORIZATION_FAILED for its partitions).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleTxnOffsetCommit(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	auth := c.authorizer()
	var code int16
	switch {
	case !auth.transactionalID(kmsg.ACLOperationWrite, req.TransactionalID):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !auth.group(kmsg.ACLOperationRead, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	}
	refused := map[string]bool{}
	var permitted []kmsg.TxnOffsetCommitRequestTopic
	for _, t := range req.Topics {
		if code == 0 && !auth.topic(kmsg.ACLOperationRead, t.Topic) {
			refused[t.Topic] = true
			continue
		}
		permitted = append(permitted, t)
	}
	var answered []kmsg.TxnOffsetCommitResponseTopic
	if code == 0 && len(permitted) > 0 {
		sub := *req
		sub.Topics = permitted
		answered = s.groups.Groups().TxnOffsetCommit(&sub).Topics
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	next := 0
	for _, t := range req.Topics {
		if code == 0 && !refused[t.Topic] && next < len(answered) {
			resp.Topics = append(resp.Topics, answered[next])
			next++
			continue
		}
		partCode := code
		if partCode == 0 {
			partCode = kerr.TopicAuthorizationFailed.Code
		}
		st := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			st.Partitions = append(st.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: partCode})
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
