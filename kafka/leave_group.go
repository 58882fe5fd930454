package kafka

// LeaveGroup, v0-v5.
//
// Behaviour: removes one member (v0-v2, error at the top level) or a
// batch (v3+, per-member errors; static members by group.instance.id with
// an empty member id); the group rebalances at once instead of waiting for
// the session timeout. Authorization: READ on the group, else
// GROUP_AUTHORIZATION_FAILED at the top level.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleLeaveGroup(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	auth := c.authorizer()
	if !auth.group(kmsg.ACLOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	return s.groups.Groups().LeaveGroup(req), nil
}
