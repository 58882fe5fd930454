package kafka

// ListOffsets, v1-v11.
//
// Behaviour:
//   - Timestamp -1 (latest): the high watermark, or the last stable offset
//     for read_committed (v2+; equal without transactions).
//   - -2 (earliest) and -4 (earliest local, KIP-405): the log start offset.
//   - -3 (max timestamp, KIP-734, v7+): the record with the largest
//     timestamp.
//   - Any other timestamp: the first record whose timestamp is at or after
//     it; none gives offset -1 and timestamp -1, as Kafka does.
//   - Answered by the partition leader only (else NOT_LEADER_OR_FOLLOWER).
//     The response's leader epoch (v4+) is the epoch of the batch holding
//     the offset found, or the latest epoch for latest/earliest; a
//     current_leader_epoch (v4+) newer than the leader's is
//     UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH.
//   - Authorization: DESCRIBE on the topic, per topic, else
//     TOPIC_AUTHORIZATION_FAILED for its partitions, before the topic's
//     existence is looked at.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleListOffsets(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	auth := c.authorizer()
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		t := s.topics.Topic(rt.Topic)
		topicErr := kerr.UnknownTopicOrPartition.Code
		if !auth.topic(kmsg.ACLOperationDescribe, rt.Topic) {
			t, topicErr = nil, kerr.TopicAuthorizationFailed.Code
		}
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Offset, sp.Timestamp, sp.LeaderEpoch = rp.Partition, -1, -1, 0
			if t == nil {
				sp.ErrorCode = topicErr
				continue
			}
			epoch := rp.CurrentLeaderEpoch
			if req.Version < 4 {
				epoch = -1
			}
			p, err := t.LeaderPartition(rp.Partition, epoch)
			if err != nil {
				sp.ErrorCode = errorCode(err)
				continue
			}
			off, ts, leaderEpoch, err := s.records.ListOffset(p, rp.Timestamp, req.IsolationLevel)
			sp.ErrorCode, sp.Offset, sp.Timestamp, sp.LeaderEpoch = errorCode(err), off, ts, leaderEpoch
		}
	}
	return resp, nil
}
