package kafka

// DeleteGroups, v0-v2.
//
// Behaviour: deletes empty groups and their offsets (tombstones in
// __consumer_offsets); NON_EMPTY_GROUP while members remain,
// GROUP_ID_NOT_FOUND for unknown groups. Authorization: DELETE on each
// group, else GROUP_AUTHORIZATION_FAILED for that group alone.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDeleteGroups(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	auth := c.authorizer()
	if !auth.enabled {
		return s.groups.Groups().DeleteGroups(req), nil
	}
	permitted := *req
	var allowed []bool
	permitted.Groups, allowed = partitionAllowed(req.Groups, func(id *string) bool {
		return auth.group(kmsg.ACLOperationDelete, *id)
	})
	deleted := s.groups.Groups().DeleteGroups(&permitted)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	next := 0
	for i, id := range req.Groups {
		if allowed[i] {
			resp.Groups = append(resp.Groups, deleted.Groups[next])
			next++
			continue
		}
		d := kmsg.NewDeleteGroupsResponseGroup()
		d.Group, d.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil
}
