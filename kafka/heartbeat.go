package kafka

// Heartbeat, v0-v4.
//
// Behaviour: keeps a member's session alive; REBALANCE_IN_PROGRESS tells
// it to rejoin; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION and
// FENCED_INSTANCE_ID as in Kafka. A member that sends nothing for its
// session timeout is removed and the group rebalances. Authorization: READ
// on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleHeartbeat(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	auth := c.authorizer()
	if !auth.group(kmsg.ACLOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	return s.groups.Groups().Heartbeat(req), nil
}
