package kafka

// ConsumerGroupHeartbeat, v0-v1 (KIP-848).
//
// Behaviour (the group package has the state machine): a member joins
// with epoch 0, heartbeats with its epoch and the partitions it owns,
// and leaves with -1 (-2: a static member that will be back). Each answer
// carries the member's epoch, the heartbeat interval and, when it
// changed or the request was a full one, its assignment. The coordinator
// computes target assignments with the server assignors (uniform, range)
// and reconciles each member to its target, revoking before it assigns.
// v0 members get their id from the coordinator; v1 members bring one.
//
// Errors: INVALID_REQUEST for fields Kafka refuses, INVALID_GROUP_ID,
// UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, UNKNOWN_MEMBER_ID,
// FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID,
// GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND (a classic group with
// members), NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED;
// DESCRIBE on every subscribed topic name, else TOPIC_AUTHORIZATION_FAILED
// naming them.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleConsumerGroupHeartbeat(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	auth := c.authorizer()
	if auth.enabled {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		if !auth.group(kmsg.ACLOperationRead, req.Group) {
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil
		}
		var refused []string
		for _, t := range req.SubscribedTopicNames {
			if !auth.topic(kmsg.ACLOperationDescribe, t) {
				refused = append(refused, t)
			}
		}
		if len(refused) > 0 {
			msg := fmt.Sprintf("The group is not authorized to describe the topics %s.", strings.Join(refused, ", "))
			resp.ErrorCode, resp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, &msg
			return resp, nil
		}
	}
	return s.groups.Groups().ConsumerGroupHeartbeat(req, c.client()), nil
}
