package kafka

// ListGroups, v0-v5.
//
// Behaviour: every group this coordinator owns, with its protocol type,
// state (v4+, filterable, case-insensitive) and type (v5+: "classic",
// filterable).
//
// Authorization, as Kafka's: a client allowed DESCRIBE on the cluster sees
// every group; any other sees only the groups it may DESCRIBE, and no
// error.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleListGroups(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := s.groups.Groups().ListGroups(kreq.(*kmsg.ListGroupsRequest))
	auth := c.authorizer()
	if auth.clusterQuietly(kmsg.ACLOperationDescribe) {
		return resp, nil
	}
	visible := resp.Groups[:0]
	for _, g := range resp.Groups {
		if auth.groupQuietly(kmsg.ACLOperationDescribe, g.Group) {
			visible = append(visible, g)
		}
	}
	resp.Groups = visible
	return resp, nil
}
