package kafka

// SyncGroup, v0-v5.
//
// Behaviour:
//   - Followers wait for the leader; the leader's assignment is stored in
//     __consumer_offsets before anyone is answered, then every member gets
//     its own part (members the leader left out get an empty one).
//   - In a stable group a member gets its current assignment at once.
//   - Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
//     REBALANCE_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL (v5+ protocol
//     type or name that differs from the group's).
//   - Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleSyncGroup(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	auth := c.authorizer()
	if !auth.group(kmsg.ACLOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	resp := s.groups.Groups().SyncGroup(c.ctx, req)
	if resp == nil {
		return nil, errConnClosing
	}
	return resp, nil
}
