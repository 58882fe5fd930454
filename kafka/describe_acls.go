package kafka

// DescribeAcls, v0-v3.
//
// Behaviour, as Kafka's:
//   - Needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
//   - Lists the bindings the filter selects (Kafka's AclBindingFilter:
//     ANY fields, a null name, principal or host match everything; the
//     MATCH pattern type selects the literal, wildcard and prefixed
//     bindings that apply to the name), grouped by resource pattern.
//   - A filter with an UNKNOWN field is INVALID_REQUEST. v0 has no
//     pattern type and sees LITERAL bindings only.
//   - The bindings are this broker's copy of the controller's, current as
//     of the last controller entry it applied.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

func (s *Server) handleDescribeAcls(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationDescribe) {
		err := clusterAuthorizationError("describe ACLs")
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	bindings, err := s.security.DescribeACLs(aclFilter(req.ResourceType, req.ResourceName, req.ResourcePatternType,
		req.Principal, req.Host, req.Operation, req.PermissionType))
	if err != nil {
		err = wireError(err)
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	// Bindings come sorted by resource type, pattern type and name, so a
	// resource's bindings are adjacent.
	for _, b := range bindings {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != b.ResourceType ||
			resp.Resources[n-1].ResourcePatternType != b.PatternType || resp.Resources[n-1].ResourceName != b.ResourceName {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			resp.Resources = append(resp.Resources, r)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return resp, nil
}

// aclFilter is the filter DescribeAcls and DeleteAcls send.
func aclFilter(rt kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) controller.ACLFilter {
	return controller.ACLFilter{ResourceType: rt, ResourceName: name, PatternType: pattern,
		Principal: principal, Host: host, Operation: op, Permission: perm}
}

// clusterAuthorizationError refuses an ACL API to a principal without the
// cluster permission it needs.
func clusterAuthorizationError(what string) error {
	return fmt.Errorf("%w: not allowed to %s", kerr.ClusterAuthorizationFailed, what)
}

// wireError rewrites a refusal of the controller so that error_message
// carries its reason alone.
func wireError(err error) error {
	var ce *controller.Error
	if errors.As(err, &ce) {
		return fmt.Errorf("%w: %s", ce.Code, ce.Message)
	}
	return err
}
