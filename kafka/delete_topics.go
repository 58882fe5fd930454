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
					st.TopicID = t.ID
				}
				err = s.topicAdmin.DeleteTopic(*rt.Topic)
			}
		case rt.TopicID != [16]byte{}:
			if t := s.topics.TopicByID(controller.TopicID(rt.TopicID)); t != nil && !mayDelete(t.Name) {
				err = kerr.TopicAuthorizationFailed
				if auth.topicQuietly(kmsg.ACLOperationDescribe, t.Name) {
					st.Topic = kmsg.StringPtr(t.Name)
				}
				break
			}
			var name string
			name, err = s.topicAdmin.DeleteTopicByID(controller.TopicID(rt.TopicID))
			if err == nil {
				st.Topic = &name
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
	return resp, nil
}
