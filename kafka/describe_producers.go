package kafka

// DescribeProducers, v0 (kafka-transactions describe-producers).
//
// Behaviour:
//   - For each partition led here, the idempotent producers its
//     replicas remember (the last 5 batches of each, which every replica
//     keeps the same): id, epoch, last sequence and the max timestamp of
//     its last batch (-1 for both when it has none, and the timestamp -1
//     once that batch left the log), the coordinator epoch of its last
//     transaction marker and the first offset of its open transaction
//     (-1 for none of either), as Kafka shows them.
//   - Not the leader: NOT_LEADER_OR_FOLLOWER (the admin client asks each
//     partition's leader); unknown partitions UNKNOWN_TOPIC_OR_PARTITION.
//   - Authorization: READ on each topic, else TOPIC_AUTHORIZATION_FAILED
//     for its partitions, as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

func (s *Server) handleDescribeProducers(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	auth := c.authorizer()
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t := s.topics.Topic(rt.Topic)
		topicErr := kerr.UnknownTopicOrPartition.Code
		if !auth.topic(kmsg.ACLOperationRead, rt.Topic) {
			t, topicErr = nil, kerr.TopicAuthorizationFailed.Code
		}
		for _, partition := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = partition
			if t == nil {
				sp.ErrorCode = topicErr
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, err := t.LeaderPartition(partition, -1)
			var producers []broker.ProducerInfo
			if err == nil {
				producers, err = s.records.Producers(p)
			}
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = errorCode(err), errorMessage(err)
			} else {
				for _, pi := range producers {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = pi.ID, int32(pi.Epoch), pi.LastSequence, pi.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
