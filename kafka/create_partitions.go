package kafka

// CreatePartitions, v0-v3.
//
// Behaviour:
//   - Raises a topic's partition count to the requested total; the new
//     partitions are empty and served at once. A total not above the
//     current count is INVALID_PARTITIONS, an unknown topic
//     UNKNOWN_TOPIC_OR_PARTITION, a manual assignment INVALID_REQUEST, a
//     topic named twice INVALID_REQUEST. validate_only changes nothing.
//   - Authorization: ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED
//     (whether it exists or not).
//   - controller_mutation_rate (KIP-599): the new partitions count
//     against the client's quota; while it is exceeded, v3+ refuses with
//     THROTTLING_QUOTA_EXCEEDED, older versions create them; both answer
//     with the throttle time. validate_only requests are not counted.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleCreatePartitions(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	auth := c.authorizer()
	mutations := c.mutationQuota(req.Version >= 3)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		var err error
		switch {
		case seen[rt.Topic] > 1:
			err = fmt.Errorf("%w: topic %q appears more than once", kerr.InvalidRequest, rt.Topic)
		case !auth.topic(kmsg.ACLOperationAlter, rt.Topic):
			err = fmt.Errorf("%w: not allowed to alter topic %s", kerr.TopicAuthorizationFailed, rt.Topic)
		case len(rt.Assignment) > 0:
			err = fmt.Errorf("%w: manual replica assignment is not supported", kerr.InvalidRequest)
		case req.ValidateOnly:
			err = s.topicAdmin.CreatePartitions(rt.Topic, rt.Count, true)
		default:
			if err = mutations.check(); err != nil {
				break
			}
			var before int
			if t := s.topics.Topic(rt.Topic); t != nil {
				before = len(t.Partitions())
			}
			if err = s.topicAdmin.CreatePartitions(rt.Topic, rt.Count, false); err == nil {
				mutations.record(int(rt.Count) - before)
			}
		}
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Topics = append(resp.Topics, st)
	}
	resp.ThrottleMillis = mutations.throttleMillis()
	return resp, nil
}
