package kafka

// LeaveGroup, v0-v5.
//
// Behaviour: removes one member (v0-v2, error at the top level) or a
// batch (v3+, per-member errors; static members by group.instance.id with
// an empty member id); the group rebalances at once instead of waiting for
// the session timeout.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleLeaveGroup(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	return s.broker.Groups().LeaveGroup(kreq.(*kmsg.LeaveGroupRequest)), nil
}
