package kafka

// DeleteAcls, v0-v3.
//
// Behaviour, as Kafka's:
//   - Needs ALTER on the cluster, else every filter is
//     CLUSTER_AUTHORIZATION_FAILED.
//   - One result per filter, in order, listing the bindings it deleted.
//     Filters match as DescribeAcls's do (MATCH deletes the literal,
//     wildcard and prefixed bindings that apply to a name); a binding two
//     filters match is listed by both. A filter with an UNKNOWN field is
//     INVALID_REQUEST and does not stop the others; the valid ones are
//     applied together through the controller. v0 has no pattern type:
//     its filters match LITERAL bindings only.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/controller"
)

func (s *Server) handleDeleteAcls(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	deletions := make([]broker.ACLDeletion, len(req.Filters))
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationAlter) {
		for i := range deletions {
			deletions[i].Err = clusterAuthorizationError("delete ACLs")
		}
	} else {
		filters := make([]controller.ACLFilter, len(req.Filters))
		for i, f := range req.Filters {
			filters[i] = aclFilter(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
		}
		deletions = s.security.DeleteACLs(filters)
	}
	for _, d := range deletions {
		r := kmsg.NewDeleteACLsResponseResult()
		if d.Err != nil {
			err := wireError(d.Err)
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
		}
		for _, b := range d.Deleted {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
