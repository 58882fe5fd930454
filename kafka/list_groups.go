package kafka

// ListGroups, v0-v5.
//
// Behaviour: every group this coordinator owns, with its protocol type,
// state (v4+, filterable, case-insensitive) and type (v5+: "classic",
// filterable).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleListGroups(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	return s.broker.Groups().ListGroups(kreq.(*kmsg.ListGroupsRequest)), nil
}
