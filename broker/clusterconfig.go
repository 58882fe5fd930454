package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
)

// PropertyChange is one change to a cluster property: set Name to Value,
// or with Remove reset it to its default.
type PropertyChange struct {
	Name   string
	Value  string
	Remove bool
}

// maxPropertyValueBytes is the longest value a property may be set to:
// the longest string DescribeConfigs v1-v3 can carry (an int16 length),
// whereas IncrementalAlterConfigs v1 can send longer ones, and a longer
// value would make every DescribeConfigs answer about the brokers at
// those versions unreadable. Checked here, where changes are made, not
// by the controller's state machine, so that entries written before the
// check still apply.
const maxPropertyValueBytes = 32767

// AlterClusterProperties validates every change against the property
// registry, then applies them all at once through the controller's Raft
// log (one SetClusterProperties command, unconditional), so every broker
// takes them without a restart and a restart keeps them. A refusal names
// the property and the reason and wraps kerr.InvalidConfig (unknown name,
// malformed or out-of-range value, a property named twice); nothing
// changes then. validateOnly checks without changing anything.
func (b *Broker) AlterClusterProperties(changes []PropertyChange, validateOnly bool) error {
	reg := b.props.Registry()
	cmd := controller.SetClusterProperties{ExpectedVersion: -1, Changes: make([]controller.PropertyChange, 0, len(changes))}
	seen := map[string]bool{}
	for _, ch := range changes {
		p, ok := reg.Lookup(ch.Name)
		if !ok {
			return fmt.Errorf("%w: unknown cluster property %q", kerr.InvalidConfig, ch.Name)
		}
		if seen[ch.Name] {
			return fmt.Errorf("%w: cluster property %q is changed twice in one request", kerr.InvalidConfig, ch.Name)
		}
		seen[ch.Name] = true
		if !ch.Remove {
			if err := p.Validate(ch.Value); err != nil {
				return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
			}
			if len(ch.Value) > maxPropertyValueBytes {
				return fmt.Errorf("%w: %s: a value of %d bytes is longer than %d", kerr.InvalidConfig, ch.Name, len(ch.Value), maxPropertyValueBytes)
			}
		}
		if !ch.Remove {
			if err := b.CheckEnterprise(ch.Name, ch.Value); err != nil {
				return err
			}
		}
		cmd.Changes = append(cmd.Changes, controller.PropertyChange{Name: ch.Name, Value: ch.Value, Reset: ch.Remove})
	}
	if len(cmd.Changes) == 0 {
		return nil
	}
	if validateOnly {
		_, err := b.ctrl.check(cmd)
		return err
	}
	_, err := b.ctrl.propose(cmd)
	return err
}

// ClusterConfigVersion is the controller's cluster config version: the
// number of applied batches of property changes.
func (b *Broker) ClusterConfigVersion() int64 {
	return b.ctrl.state.View().ConfigVersion()
}
