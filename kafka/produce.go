package kafka

// Produce, v0-v13.
//
// Behaviour:
//   - v0-v2 are advertised (older librdkafka decides whether to compress
//     from them, as with Kafka 4) but refused: every partition gets
//     UNSUPPORTED_VERSION, since they carry pre-v2 message sets.
//   - acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). On a single
//     node all three append before answering; acks=0 sends no response.
//   - Per partition: unknown topic UNKNOWN_TOPIC_OR_PARTITION (or, v13+,
//     UNKNOWN_TOPIC_ID; auto-created when the cluster allows it), a
//     malformed batch CORRUPT_MESSAGE, a batch above max.message.bytes
//     MESSAGE_TOO_LARGE, records above segment.bytes
//     RECORD_LIST_TOO_LARGE, idempotence violations
//     OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_PRODUCER_EPOCH; a retried
//     batch gets its original offsets and no error.
//   - Exactly one batch per partition; control batches, transactional
//     batches (no transactions yet) and idempotent batches without a
//     sequence are INVALID_RECORD; zstd before v7 and unknown codecs are
//     UNSUPPORTED_COMPRESSION_TYPE.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

func (s *Server) handleProduce(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var reqErr error
	switch {
	case req.Version < 3:
		reqErr = kerr.UnsupportedVersion
	case req.Acks != -1 && req.Acks != 0 && req.Acks != 1:
		reqErr = kerr.InvalidRequiredAcks
	case req.TransactionID != nil:
		reqErr = kerr.TransactionalIDAuthorizationFailed
	}
	opts := broker.ProduceOptions{AllowZstd: req.Version >= 7}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name, topicErr := rt.Topic, reqErr
		if topicErr == nil && req.Version >= 13 {
			if t := s.broker.TopicByID(broker.TopicID(rt.TopicID)); t != nil {
				name = t.Name
			} else {
				topicErr = kerr.UnknownTopicID
			}
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			err := topicErr
			var res broker.AppendResult
			if err == nil {
				res, err = s.broker.Produce(name, rp.Partition, rp.Records, opts)
			}
			if err != nil {
				sp.ErrorCode, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = errorCode(err), -1, -1, -1
				if req.Version >= 8 {
					sp.ErrorMessage = errorMessage(err)
				}
				c.logger.Debug("produce refused", "topic", name, "partition", rp.Partition, "err", err)
				continue
			}
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
		}
	}
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, nil
}
