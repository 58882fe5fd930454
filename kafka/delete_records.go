package kafka

// DeleteRecords, v0-v2.
//
// Behaviour:
//   - Moves each partition's log start offset to the requested offset
//     (-1: the high watermark) and answers the new low watermark. Whole
//     segments below it are removed; consumers can no longer read below
//     it (OFFSET_OUT_OF_RANGE) and ListOffsets earliest returns it.
//   - An offset above the high watermark is OFFSET_OUT_OF_RANGE; unknown
//     partitions UNKNOWN_TOPIC_OR_PARTITION. The deletion goes through the
//     partition's Raft group, so every replica applies it; only the
//     leader takes it (NOT_LEADER_OR_FOLLOWER) and the request's timeout
//     bounds the wait.
//   - Authorization: DELETE on the topic, per topic, else
//     TOPIC_AUTHORIZATION_FAILED for its partitions, before the topic's
//     existence is looked at.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteRecords(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultProduceTimeout
	}
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	auth := c.authorizer()
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t := s.topics.Topic(rt.Topic)
		topicErr := kerr.UnknownTopicOrPartition.Code
		if !auth.topic(kmsg.ACLOperationDelete, rt.Topic) {
			t, topicErr = nil, kerr.TopicAuthorizationFailed.Code
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			if t == nil {
				sp.ErrorCode = topicErr
			} else if p, err := t.LeaderPartition(rp.Partition, -1); err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				low, err := s.topicAdmin.DeleteRecords(ctx, p, rp.Offset)
				sp.ErrorCode, sp.LowWatermark = errorCode(err), low
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
