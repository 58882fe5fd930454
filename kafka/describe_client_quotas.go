package kafka

// DescribeClientQuotas, v0-v1.
//
// Behaviour, as Kafka's:
//   - Needs DESCRIBE_CONFIGS on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED.
//   - Lists the entities every filter component selects (EXACT: the
//     entity's part of that type has the name; DEFAULT: it is the
//     default; SPECIFIED: the entity has a part of that type), with
//     strict only the entities with no other parts; no component selects
//     every entity (none with strict).
//   - A malformed filter (empty or repeated entity type, a match string
//     where none belongs or none where one does, an unknown match type,
//     ip with user or client-id) is INVALID_REQUEST, an unknown entity
//     type UNSUPPORTED_VERSION, with Kafka's messages, at the top level.
//   - The quotas are this broker's copy of the controller's, current as
//     of the last controller entry it applied.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

func (s *Server) handleDescribeClientQuotas(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationDescribeConfigs) {
		err := clusterAuthorizationError("describe client quotas")
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	f := controller.ClientQuotaFilter{Strict: req.Strict}
	for _, comp := range req.Components {
		f.Components = append(f.Components, controller.QuotaFilterComponent{EntityType: comp.EntityType, MatchType: int8(comp.MatchType), Match: comp.Match})
	}
	quotas, err := s.quotas.DescribeClientQuotas(f)
	if err != nil {
		err = wireError(err)
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	// Entries is nullable on the wire, null meaning an error: the Java
	// client reads a null list on success as a failure.
	resp.Entries = make([]kmsg.DescribeClientQuotasResponseEntry, 0, len(quotas))
	for _, q := range quotas {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			e.Entity = append(e.Entity, ent)
		}
		for _, k := range sortedKeys(q.Values) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

// sortedKeys lists m's keys in order, so that answers do not vary with
// map iteration.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
