package kafka

// DeleteGroups, v0-v2.
//
// Behaviour: deletes empty groups and their offsets (tombstones in
// __consumer_offsets); NON_EMPTY_GROUP while members remain,
// GROUP_ID_NOT_FOUND for unknown groups.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteGroups(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	return s.broker.Groups().DeleteGroups(kreq.(*kmsg.DeleteGroupsRequest)), nil
}
