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
//   - Leader epoch in the response is 0; a current_leader_epoch (v4+)
//     newer than 0 is UNKNOWN_LEADER_EPOCH.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleListOffsets(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		t := s.broker.Topic(rt.Topic)
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Offset, sp.Timestamp, sp.LeaderEpoch = rp.Partition, -1, -1, 0
			if t == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			p, err := t.LocalPartition(rp.Partition)
			if err != nil {
				sp.ErrorCode = errorCode(err)
				continue
			}
			if rp.CurrentLeaderEpoch > 0 {
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
				continue
			}
			off, ts, err := s.broker.ListOffset(p, rp.Timestamp, req.IsolationLevel)
			sp.ErrorCode, sp.Offset, sp.Timestamp = errorCode(err), off, ts
		}
	}
	return resp, nil
}
