package kafka

// JoinGroup, v0-v9.
//
// Behaviour (the group package has the state machine):
//   - Answers when the group's rebalance completes: every member rejoined,
//     or the rebalance timeout passed (v0, which has none, uses the
//     session timeout). The first rebalance of an empty group waits
//     group_initial_rebalance_delay_ms for more members.
//   - v4+ dynamic members without an id get MEMBER_ID_REQUIRED and an id
//     to rejoin with (KIP-394). Static members (group.instance.id, v5+)
//     rejoining while the group is stable with unchanged protocols get
//     their assignment back without a rebalance (KIP-345); v9 tells such a
//     leader to skip assigning (KIP-814).
//   - The leader receives every member's metadata for the protocol all
//     members support, chosen by Kafka's vote.
//   - Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside
//     group_min/max_session_timeout_ms), INCONSISTENT_GROUP_PROTOCOL,
//     UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, COORDINATOR_LOAD_IN_PROGRESS.
//   - Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED
//     before anything else is looked at.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleJoinGroup(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	auth := c.authorizer()
	if !auth.group(kmsg.ACLOperationRead, req.Group) {
		// Kafka's error answer: no member id, generation -1.
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = kerr.GroupAuthorizationFailed.Code, -1
		return resp, nil
	}
	resp := s.groups.Groups().JoinGroup(c.ctx, req, c.client())
	if resp == nil {
		return nil, errConnClosing
	}
	return resp, nil
}
