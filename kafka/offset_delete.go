package kafka

// OffsetDelete, v0.
//
// Behaviour: deletes a group's committed offsets for the given
// partitions. While a consumer group has members, partitions of topics
// they subscribe to answer GROUP_SUBSCRIBED_TO_TOPIC; a non-empty group
// of another protocol type answers NON_EMPTY_GROUP; an unknown group
// GROUP_ID_NOT_FOUND.
//
// Authorization, as Kafka's: DELETE on the group, else
// GROUP_AUTHORIZATION_FAILED for the request; READ on each topic, else
// TOPIC_AUTHORIZATION_FAILED for its partitions.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetDelete(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	auth := c.authorizer()
	if !auth.enabled {
		return s.groups.Groups().OffsetDelete(req), nil
	}
	if !auth.group(kmsg.ACLOperationDelete, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	permitted := *req
	var allowed []bool
	permitted.Topics, allowed = partitionAllowed(req.Topics, func(rt *kmsg.OffsetDeleteRequestTopic) bool {
		return auth.topic(kmsg.ACLOperationRead, rt.Topic)
	})
	deleted := s.groups.Groups().OffsetDelete(&permitted)
	if deleted.ErrorCode != 0 {
		return deleted, nil
	}
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	next := 0
	for i, rt := range req.Topics {
		if allowed[i] {
			resp.Topics = append(resp.Topics, deleted.Topics[next])
			next++
			continue
		}
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
