package kafka

// OffsetCommit, v2-v9.
//
// Behaviour:
//   - Members commit with their generation; generation -1 with no member
//     id is a standalone consumer or an admin tool, allowed only while the
//     group has no members (else UNKNOWN_MEMBER_ID), and creates the group
//     if needed.
//   - Offsets are written to __consumer_offsets before the answer. Per
//     partition: UNKNOWN_TOPIC_OR_PARTITION for partitions that do not
//     exist, OFFSET_METADATA_TOO_LARGE above 4096 bytes of metadata.
//   - Group errors, per partition: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
//     REBALANCE_IN_PROGRESS (while the assignment is being synced),
//     FENCED_INSTANCE_ID. A commit during PreparingRebalance from the
//     current generation is accepted, so consumers commit before
//     rejoining.
//   - Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED
//     for every partition; READ on each topic, else
//     TOPIC_AUTHORIZATION_FAILED for its partitions while the others are
//     committed. A request with no topic allowed commits nothing.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetCommit(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	auth := c.authorizer()
	if !auth.enabled {
		return s.groups.Groups().OffsetCommit(req), nil
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	if !auth.group(kmsg.ACLOperationRead, req.Group) {
		for _, rt := range req.Topics {
			resp.Topics = append(resp.Topics, offsetCommitFailed(rt, kerr.GroupAuthorizationFailed.Code))
		}
		return resp, nil
	}
	permitted := *req
	var allowed []bool
	permitted.Topics, allowed = partitionAllowed(req.Topics, func(rt *kmsg.OffsetCommitRequestTopic) bool {
		return auth.topic(kmsg.ACLOperationRead, rt.Topic)
	})
	var committed []kmsg.OffsetCommitResponseTopic
	if len(permitted.Topics) > 0 {
		committed = s.groups.Groups().OffsetCommit(&permitted).Topics
	}
	next := 0
	for i, rt := range req.Topics {
		if allowed[i] {
			resp.Topics = append(resp.Topics, committed[next])
			next++
			continue
		}
		resp.Topics = append(resp.Topics, offsetCommitFailed(rt, kerr.TopicAuthorizationFailed.Code))
	}
	return resp, nil
}

// offsetCommitFailed answers every partition of rt with code.
func offsetCommitFailed(rt kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
	st := kmsg.NewOffsetCommitResponseTopic()
	st.Topic = rt.Topic
	for _, rp := range rt.Partitions {
		sp := kmsg.NewOffsetCommitResponseTopicPartition()
		sp.Partition, sp.ErrorCode = rp.Partition, code
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}
