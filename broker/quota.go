package broker

import (
	"github.com/weir-broker/weir/broker/controller"
)

// Client quotas: stored by the controller, read by every broker's Kafka
// layer, which enforces them (kafka/quota.go).

// DescribeClientQuotas lists the quotas of the entities f selects, as this
// broker last applied them.
func (b *Broker) DescribeClientQuotas(f controller.ClientQuotaFilter) ([]controller.ClientQuota, error) {
	return b.ctrl.state.View().DescribeClientQuotas(f)
}

// ClientQuotas lists every entity's quotas.
func (b *Broker) ClientQuotas() []controller.ClientQuota {
	return b.ctrl.state.View().ClientQuotas()
}

// ClientQuotasIndex is the controller index that last changed the
// quotas: readers rebuild what they derive from them only when it moves.
func (b *Broker) ClientQuotasIndex() uint64 {
	return b.ctrl.state.View().ClientQuotasIndex()
}

// AlterClientQuotas stores alterations through the controller and returns
// one error per alteration. Invalid ones get INVALID_REQUEST and do not
// stop the others, as Kafka answers per entity; the valid ones are
// stored together (or, with validateOnly, only checked). The caller
// refuses duplicate entities and keys, which only the request shows.
func (b *Broker) AlterClientQuotas(alts []controller.ClientQuotaAlteration, validateOnly bool) []error {
	errs := make([]error, len(alts))
	var valid []controller.ClientQuotaAlteration
	var validAt []int
	for i, a := range alts {
		if errs[i] = controller.ValidateClientQuotaAlteration(a); errs[i] == nil {
			valid = append(valid, a)
			validAt = append(validAt, i)
		}
	}
	if len(valid) == 0 {
		return errs
	}
	cmd := controller.AlterClientQuotas{Alterations: valid}
	var err error
	if validateOnly {
		_, err = b.ctrl.check(cmd)
	} else {
		_, err = b.ctrl.propose(cmd)
	}
	if err != nil {
		for _, i := range validAt {
			errs[i] = err
		}
		return errs
	}
	if !validateOnly {
		b.logger.Info("altered client quotas", "entities", len(valid))
	}
	return errs
}
