package kafka

// AlterClientQuotas, v0-v1.
//
// Behaviour, as Kafka's:
//   - Needs ALTER_CONFIGS on the cluster, else every entity is
//     CLUSTER_AUTHORIZATION_FAILED.
//   - One result per entity, in the order they first appear. An entity
//     is a user, a client id, both, or an IP address (a part with a null
//     name is that type's default). An op with remove set removes its
//     key (a key not set is no error); others set it. Keys:
//     producer_byte_rate and consumer_byte_rate (integral),
//     request_percentage and controller_mutation_rate for user and
//     client-id entities, connection_creation_rate (integral) for ip
//     entities, every value above 0. Anything else is INVALID_REQUEST
//     with Kafka's message, and does not stop the other entities; the
//     valid ones are stored together through the controller, or only
//     checked with validate_only.
//   - An entity named twice in one request is refused ("Ignoring
//     duplicate entity"), a key named twice for one entity too.
//   - ip entities must be IP literals (Kafka also resolves host names;
//     the controller stores them without DNS). Their
//     connection_creation_rate is stored and described but not enforced.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/controller"
)

func (s *Server) handleAlterClientQuotas(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)

	// One alteration per distinct entity, in order of first appearance.
	var alts []controller.ClientQuotaAlteration
	var raw [][]kmsg.AlterClientQuotasRequestEntryEntity // as the client sent each entity
	errs := []error{}
	at := map[string]int{}
	for _, e := range req.Entries {
		entity := make(controller.ClientQuotaEntity, 0, len(e.Entity))
		for _, p := range e.Entity {
			entity = append(entity, controller.QuotaEntityPart{Type: p.Type, Name: p.Name})
		}
		key := entity.Key()
		if i, dup := at[key]; dup {
			errs[i] = quotaRequestError("Ignoring duplicate entity " + alts[i].Entity.String())
			continue
		}
		a := controller.ClientQuotaAlteration{Entity: entity}
		var err error
		seen := map[string]bool{}
		for _, op := range e.Ops {
			if seen[op.Key] {
				err = quotaRequestError("Duplicate quota key " + op.Key + " not updating quota for this entity " + entity.String())
			}
			seen[op.Key] = true
			if op.Remove {
				a.Remove = append(a.Remove, op.Key)
				continue
			}
			if a.Set == nil {
				a.Set = map[string]float64{}
			}
			a.Set[op.Key] = op.Value
		}
		at[key] = len(alts)
		alts = append(alts, a)
		raw = append(raw, e.Entity)
		errs = append(errs, err)
	}

	auth := c.authorizer()
	switch {
	case !auth.cluster(kmsg.ACLOperationAlterConfigs):
		for i := range errs {
			errs[i] = clusterAuthorizationError("alter client quotas")
		}
	default:
		var valid []controller.ClientQuotaAlteration
		var validAt []int
		for i, a := range alts {
			if errs[i] == nil {
				valid = append(valid, a)
				validAt = append(validAt, i)
			}
		}
		if len(valid) > 0 {
			for j, err := range s.quotas.AlterClientQuotas(valid, req.ValidateOnly) {
				errs[validAt[j]] = err
			}
		}
	}

	for i, err := range errs {
		r := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range raw[i] {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			r.Entity = append(r.Entity, ent)
		}
		if err != nil {
			err = wireError(err)
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
		}
		resp.Entries = append(resp.Entries, r)
	}
	return resp, nil
}

// quotaRequestError is an INVALID_REQUEST whose message is msg alone.
func quotaRequestError(msg string) error {
	return &controller.Error{Code: kerr.InvalidRequest, Message: msg}
}
