package kafka

// DescribeGroups, v0-v6.
//
// Behaviour: state, protocol type, chosen protocol and members with their
// client id, host, metadata and (when stable) assignment. An unknown
// group is state Dead with no error before v6 and GROUP_ID_NOT_FOUND from
// v6, as in Kafka 4. Authorized operations are not computed (no ACLs
// yet).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeGroups(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	return s.broker.Groups().DescribeGroups(kreq.(*kmsg.DescribeGroupsRequest)), nil
}
