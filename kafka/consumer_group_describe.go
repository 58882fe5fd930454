package kafka

// ConsumerGroupDescribe, v0-v1 (KIP-848).
//
// Behaviour: each consumer-protocol group's state, group epoch, target
// assignment epoch, assignor and members, each with its epoch,
// subscription, current and target assignment (topic ids and names), and
// (v1) member type. A classic or unknown group is GROUP_ID_NOT_FOUND, as
// in Kafka, whose admin client then describes it with DescribeGroups.
//
// Authorization: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED
// for that group; include_authorized_operations fills its
// authorized_operations (KIP-430), otherwise -2147483648.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleConsumerGroupDescribe(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	auth := c.authorizer()
	if !auth.enabled && !req.IncludeAuthorizedOperations {
		return s.groups.Groups().ConsumerGroupDescribe(req), nil
	}
	permitted := *req
	var allowed []bool
	permitted.Groups, allowed = partitionAllowed(req.Groups, func(id *string) bool {
		return auth.group(kmsg.ACLOperationDescribe, *id)
	})
	described := s.groups.Groups().ConsumerGroupDescribe(&permitted)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	next := 0
	for i, id := range req.Groups {
		if !allowed[i] {
			d := kmsg.NewConsumerGroupDescribeResponseGroup()
			d.Group, d.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		d := described.Groups[next]
		next++
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = auth.operations(kmsg.ACLResourceTypeGroup, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil
}
