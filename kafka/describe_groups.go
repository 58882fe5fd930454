package kafka

// DescribeGroups, v0-v6.
//
// Behaviour: state, protocol type, chosen protocol and members with their
// client id, host, metadata and (when stable) assignment. An unknown
// group is state Dead with no error before v6 and GROUP_ID_NOT_FOUND from
// v6, as in Kafka 4.
//
// Authorization: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED
// for that group alone. include_authorized_operations (v3+) fills each
// described group's authorized_operations (KIP-430); otherwise, and for
// refused groups, it is -2147483648.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeGroups(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	auth := c.authorizer()
	if !auth.enabled && !req.IncludeAuthorizedOperations {
		return s.groups.Groups().DescribeGroups(req), nil
	}
	permitted := *req
	var allowed []bool
	permitted.Groups, allowed = partitionAllowed(req.Groups, func(id *string) bool {
		return auth.group(kmsg.ACLOperationDescribe, *id)
	})
	described := s.groups.Groups().DescribeGroups(&permitted)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	next := 0
	for i, id := range req.Groups {
		if !allowed[i] {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		d := described.Groups[next]
		next++
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = auth.operations(kmsg.ACLResourceTypeGroup, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil
}
