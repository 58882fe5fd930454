package kafka

// AddPartitionsToTxn, v0-v5.
//
// Behaviour:
//   - v0-v3 (clients): the partitions join the producer's transaction at
//     its coordinator (broker/txn), every partition answered with the one
//     code. WRITE on the transactional id is needed, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED for all; WRITE on each topic,
//     else TOPIC_AUTHORIZATION_FAILED for its partitions; an unknown topic
//     or partition is UNKNOWN_TOPIC_OR_PARTITION. When any partition is
//     refused, the others get OPERATION_NOT_ATTEMPTED and nothing is
//     added, as Kafka answers.
//   - v4+ (partition leaders to coordinators, KIP-890): batches of
//     transactions; verify_only asks whether the partitions are already in
//     the open transaction (TRANSACTION_ABORTABLE for one that is not),
//     otherwise they are added. It needs CLUSTER_ACTION, else
//     CLUSTER_AUTHORIZATION_FAILED for the request.
//   - PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/txn"
)

func (s *Server) handleAddPartitionsToTxn(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	auth := c.authorizer()
	if req.Version >= 4 {
		if !auth.cluster(kmsg.ACLOperationClusterAction) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
		for _, t := range req.Transactions {
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = t.TransactionalID
			codes := s.addPartitionsToTxn(c, &auth, t.TransactionalID, t.ProducerID, t.ProducerEpoch, toTxnTopics(t.Topics), t.VerifyOnly, req.Version)
			for _, tp := range t.Topics {
				st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				st.Topic = tp.Topic
				for _, p := range tp.Partitions {
					sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					sp.Partition, sp.ErrorCode = p, codes[txn.TopicPartition{Topic: tp.Topic, Partition: p}]
					st.Partitions = append(st.Partitions, sp)
				}
				rt.Topics = append(rt.Topics, st)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp, nil
	}
	topics := make([]txnTopic, len(req.Topics))
	for i, t := range req.Topics {
		topics[i] = txnTopic{t.Topic, t.Partitions}
	}
	codes := s.addPartitionsToTxn(c, &auth, req.TransactionalID, req.ProducerID, req.ProducerEpoch, topics, false, req.Version)
	for _, t := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, codes[txn.TopicPartition{Topic: t.Topic, Partition: p}]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// txnTopic is a topic's partitions as a transaction request names them.
type txnTopic struct {
	topic      string
	partitions []int32
}

func toTxnTopics(ts []kmsg.AddPartitionsToTxnRequestTransactionTopic) []txnTopic {
	out := make([]txnTopic, len(ts))
	for i, t := range ts {
		out[i] = txnTopic{t.Topic, t.Partitions}
	}
	return out
}

// addPartitionsToTxn answers one transaction's partitions, each with its
// code.
func (s *Server) addPartitionsToTxn(c *clientConn, auth *requestAuthorizer, id string, pid int64, epoch int16, topics []txnTopic, verifyOnly bool, version int16) map[txn.TopicPartition]int16 {
	codes := map[txn.TopicPartition]int16{}
	var tps []txn.TopicPartition
	all := func(code int16) map[txn.TopicPartition]int16 {
		for _, tp := range tps {
			codes[tp] = code
		}
		return codes
	}
	refused := false
	for _, t := range topics {
		code := int16(0)
		switch tp := s.topics.Topic(t.topic); {
		case !auth.topic(kmsg.ACLOperationWrite, t.topic):
			code = kerr.TopicAuthorizationFailed.Code
		case tp == nil:
			code = kerr.UnknownTopicOrPartition.Code
		default:
			for _, p := range t.partitions {
				if p < 0 || int(p) >= len(tp.Partitions()) {
					codes[txn.TopicPartition{Topic: t.topic, Partition: p}] = kerr.UnknownTopicOrPartition.Code
					refused = true
				}
			}
		}
		for _, p := range t.partitions {
			tp := txn.TopicPartition{Topic: t.topic, Partition: p}
			tps = append(tps, tp)
			if code != 0 {
				codes[tp], refused = code, true
			}
		}
	}
	if !auth.transactionalID(kmsg.ACLOperationWrite, id) {
		return all(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	if refused {
		for _, tp := range tps {
			if codes[tp] == 0 {
				codes[tp] = kerr.OperationNotAttempted.Code
			}
		}
		return codes
	}
	coord, err := s.txns.Transactions()
	if err != nil {
		return all(errorCode(err))
	}
	if verifyOnly {
		verified, code := coord.VerifyPartitions(id, pid, epoch, tps)
		if code != 0 {
			return all(code)
		}
		return verified
	}
	return all(coord.AddPartitions(id, pid, epoch, tps, version))
}
