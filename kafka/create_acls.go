package kafka

// CreateAcls, v0-v3.
//
// Behaviour, as Kafka's:
//   - Needs ALTER on the cluster, else every creation is
//     CLUSTER_AUTHORIZATION_FAILED.
//   - One result per creation, in order. A creation with an ANY, MATCH or
//     UNKNOWN type, operation or permission, an empty resource name, a
//     CLUSTER resource not named kafka-cluster, a principal that is not
//     "Type:name" or an empty host is INVALID_REQUEST and does not stop
//     the others; the valid ones are stored together through the
//     controller. Creating a binding that exists succeeds and changes
//     nothing. v0 has no pattern type: its bindings are LITERAL.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

func (s *Server) handleCreateAcls(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	errs := make([]error, len(req.Creations))
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationAlter) {
		for i := range errs {
			errs[i] = clusterAuthorizationError("create ACLs")
		}
	} else {
		bindings := make([]controller.ACLBinding, len(req.Creations))
		for i, cr := range req.Creations {
			bindings[i] = controller.ACLBinding{ResourceType: cr.ResourceType, ResourceName: cr.ResourceName, PatternType: cr.ResourcePatternType,
				Principal: cr.Principal, Host: cr.Host, Operation: cr.Operation, Permission: cr.PermissionType}
		}
		errs = s.security.CreateACLs(bindings)
	}
	for _, err := range errs {
		r := kmsg.NewCreateACLsResponseResult()
		if err != nil {
			err = wireError(err)
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
