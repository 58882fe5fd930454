package kafka

// OffsetFetch, v1-v9.
//
// Behaviour: committed offsets of one group (v1-v7) or several (v8+);
// null topics means every partition with an offset; a partition without
// one reads offset -1, as in Kafka. require_stable (v7+) is satisfied
// trivially: there are no transactions, so no offsets are pending.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetFetch(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	return s.broker.Groups().OffsetFetch(kreq.(*kmsg.OffsetFetchRequest)), nil
}
