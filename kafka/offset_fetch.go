package kafka

// OffsetFetch, v1-v9.
//
// Behaviour: committed offsets of one group (v1-v7) or several (v8+);
// null topics means every partition with an offset; a partition without
// one reads offset -1, as in Kafka. require_stable (v7+) is satisfied
// trivially: there are no transactions, so no offsets are pending.
//
// Authorization, as Kafka's: DESCRIBE on the group, else
// GROUP_AUTHORIZATION_FAILED for that group (v1 has no group error field,
// so each requested partition carries it); DESCRIBE on each topic: named
// topics not allowed answer TOPIC_AUTHORIZATION_FAILED per partition, and
// a fetch of every topic leaves them out.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetFetch(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	auth := c.authorizer()
	if !auth.enabled {
		return s.groups.Groups().OffsetFetch(req), nil
	}
	if req.Version >= 8 {
		return s.offsetFetchGroups(&auth, req), nil
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if !auth.group(kmsg.ACLOperationDescribe, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		if req.Version < 2 {
			for _, rt := range req.Topics {
				resp.Topics = append(resp.Topics, offsetFetchRefusedTopic(rt.Topic, rt.Partitions, resp.ErrorCode))
			}
		}
		return resp, nil
	}
	if req.Topics == nil {
		fetched := s.groups.Groups().OffsetFetch(req)
		visible := fetched.Topics[:0]
		for _, t := range fetched.Topics {
			if auth.topicQuietly(kmsg.ACLOperationDescribe, t.Topic) {
				visible = append(visible, t)
			}
		}
		fetched.Topics = visible
		return fetched, nil
	}
	permitted := *req
	var allowed []bool
	permitted.Topics, allowed = partitionAllowed(req.Topics, func(rt *kmsg.OffsetFetchRequestTopic) bool {
		return auth.topic(kmsg.ACLOperationDescribe, rt.Topic)
	})
	if permitted.Topics == nil {
		permitted.Topics = []kmsg.OffsetFetchRequestTopic{} // none, not all
	}
	fetched := s.groups.Groups().OffsetFetch(&permitted)
	if fetched.ErrorCode != 0 {
		return fetched, nil
	}
	next := 0
	for i, rt := range req.Topics {
		if allowed[i] {
			resp.Topics = append(resp.Topics, fetched.Topics[next])
			next++
			continue
		}
		resp.Topics = append(resp.Topics, offsetFetchRefusedTopic(rt.Topic, rt.Partitions, kerr.TopicAuthorizationFailed.Code))
	}
	return resp, nil
}

// offsetFetchGroups answers a v8+ request: the groups allowed, with their
// topics allowed, go to the coordinator in one request; the rest are
// answered here, in the request's order.
func (s *Server) offsetFetchGroups(auth *requestAuthorizer, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	type groupPlan struct {
		allowed      bool
		topicAllowed []bool // per named topic
	}
	describable := func(topic string) bool { return auth.topic(kmsg.ACLOperationDescribe, topic) }
	listable := func(topic string) bool { return auth.topicQuietly(kmsg.ACLOperationDescribe, topic) }
	plans := make([]groupPlan, len(req.Groups))
	permitted := *req
	permitted.Groups = nil
	for i, rg := range req.Groups {
		if plans[i].allowed = auth.group(kmsg.ACLOperationDescribe, rg.Group); !plans[i].allowed {
			continue
		}
		if rg.Topics != nil {
			rg.Topics, plans[i].topicAllowed = partitionAllowed(rg.Topics, func(rt *kmsg.OffsetFetchRequestGroupTopic) bool { return describable(rt.Topic) })
			if rg.Topics == nil {
				rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{} // none, not all
			}
		}
		permitted.Groups = append(permitted.Groups, rg)
	}
	fetched := s.groups.Groups().OffsetFetch(&permitted)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	next := 0
	for i, rg := range req.Groups {
		if !plans[i].allowed {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g := fetched.Groups[next]
		next++
		if g.ErrorCode == 0 {
			g.Topics = mergeOffsetFetchTopics(rg.Topics, plans[i].topicAllowed, g.Topics, listable)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// mergeOffsetFetchTopics puts one group's answer in the request's order:
// for named topics the coordinator's answers and TOPIC_AUTHORIZATION_FAILED
// for the others; for every topic (requested nil) only the listable ones.
func mergeOffsetFetchTopics(requested []kmsg.OffsetFetchRequestGroupTopic, allowed []bool, fetched []kmsg.OffsetFetchResponseGroupTopic, listable func(string) bool) []kmsg.OffsetFetchResponseGroupTopic {
	var out []kmsg.OffsetFetchResponseGroupTopic
	if requested == nil {
		for _, t := range fetched {
			if listable(t.Topic) {
				out = append(out, t)
			}
		}
		return out
	}
	next := 0
	for i, rt := range requested {
		if allowed[i] {
			out = append(out, fetched[next])
			next++
			continue
		}
		refused := offsetFetchRefusedTopic(rt.Topic, rt.Partitions, kerr.TopicAuthorizationFailed.Code)
		t := kmsg.NewOffsetFetchResponseGroupTopic()
		t.Topic = rt.Topic
		for _, p := range refused.Partitions {
			t.Partitions = append(t.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode,
			})
		}
		out = append(out, t)
	}
	return out
}

// offsetFetchRefusedTopic answers each partition with code and no offset,
// as Kafka answers partitions it will not show.
func offsetFetchRefusedTopic(topic string, partitions []int32, code int16) kmsg.OffsetFetchResponseTopic {
	t := kmsg.NewOffsetFetchResponseTopic()
	t.Topic = topic
	for _, p := range partitions {
		sp := kmsg.NewOffsetFetchResponseTopicPartition()
		sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p, -1, -1, kmsg.StringPtr(""), code
		t.Partitions = append(t.Partitions, sp)
	}
	return t
}
