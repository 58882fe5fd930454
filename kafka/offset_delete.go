package kafka

// OffsetDelete, v0.
//
// Behaviour: deletes a group's committed offsets for the given
// partitions. While a consumer group has members, partitions of topics
// they subscribe to answer GROUP_SUBSCRIBED_TO_TOPIC; a non-empty group
// of another protocol type answers NON_EMPTY_GROUP; an unknown group
// GROUP_ID_NOT_FOUND.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetDelete(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	return s.broker.Groups().OffsetDelete(kreq.(*kmsg.OffsetDeleteRequest)), nil
}
