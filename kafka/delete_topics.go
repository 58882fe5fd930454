package kafka

// DeleteTopics, v1-v6.
//
// Behaviour:
//   - Topics by name (v1-v5: topic_names; v6: topics[].name) or by ID
//     (v6+). Unknown names are UNKNOWN_TOPIC_OR_PARTITION, unknown IDs
//     UNKNOWN_TOPIC_ID.
//   - The topic disappears from metadata and its files are removed before
//     the response.
//   - Authorization, as Kafka's: DELETE on the cluster allows every topic;
//     otherwise a topic named by name needs DESCRIBE (checked before its
//     existence) and DELETE, else TOPIC_AUTHORIZATION_FAILED; one named by
//     ID needs DELETE, else TOPIC_AUTHORIZATION_FAILED, with its name only
//     if the client may DESCRIBE it.
//   - controller_mutation_rate (KIP-599): a deleted topic's partitions
//     count against the client's quota; while it is exceeded, v5+
//     refuses deletions with THROTTLING_QUOTA_EXCEEDED, older versions
//     delete; both answer with the throttle time.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

func (s *Server) handleDeleteTopics(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	targets := req.Topics
	if req.Version < 6 {
		targets = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			targets[i].Topic = &req.TopicNames[i]
		}
	}
	auth := c.authorizer()
	mutations := c.mutationQuota(req.Version >= 5)
	mayDeleteAll := auth.clusterQuietly(kmsg.ACLOperationDelete)
	mayDescribe := func(name string) bool { return mayDeleteAll || auth.topic(kmsg.ACLOperationDescribe, name) }
	mayDelete := func(name string) bool { return mayDeleteAll || auth.topic(kmsg.ACLOperationDelete, name) }
	for _, rt := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var err error
		switch {
		case rt.Topic != nil:
			t := s.topics.Topic(*rt.Topic)
			switch {
			case !mayDescribe(*rt.Topic), t != nil && !mayDelete(*rt.Topic):
				err = kerr.TopicAuthorizationFailed
			default:
				if t != nil {
					st.TopicID = t.ID()
				}
				if err = mutations.check(); err != nil {
					break
				}
				if err = s.topicAdmin.DeleteTopic(*rt.Topic); err == nil && t != nil {
					mutations.record(len(t.Partitions()))
				}
			}
		case rt.TopicID != [16]byte{}:
			if t := s.topics.TopicByID(controller.TopicID(rt.TopicID)); t != nil && !mayDelete(t.Name()) {
				err = kerr.TopicAuthorizationFailed
				if auth.topicQuietly(kmsg.ACLOperationDescribe, t.Name()) {
					st.Topic = kmsg.StringPtr(t.Name())
				}
				break
			}
			if err = mutations.check(); err != nil {
				break
			}
			t := s.topics.TopicByID(controller.TopicID(rt.TopicID))
			var name string
			name, err = s.topicAdmin.DeleteTopicByID(controller.TopicID(rt.TopicID))
			if err == nil {
				st.Topic = &name
				if t != nil {
					mutations.record(len(t.Partitions()))
				}
			}
		default:
			err = kerr.InvalidRequest
		}
		st.ErrorCode = errorCode(err)
		if req.Version >= 5 && err != nil {
			st.ErrorMessage = errorMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.ThrottleMillis = mutations.throttleMillis()
	return resp, nil
}
