package broker

import (
	"os"

	"github.com/weir-broker/weir/broker/controller"
)

// reconcile makes the local topic table match a controller view: topics
// appear with the partitions assigned to this node opened, grow, take new
// configs, and disappear with their files and the groups' offsets of
// them. Cluster properties are mirrored into b.props.
func (b *Broker) reconcile(v *controller.View) {
	before := b.props.Version()
	b.mirrorProperties(v)
	licenseBefore := b.license.verified.Load()
	b.applyLicense(v)
	// A changed cluster property may be the default of topic configs the
	// partitions' logs use (retention, segment size): re-resolve them all.
	propsChanged := b.props.Version() != before
	if propsChanged || b.license.verified.Load() != licenseBefore {
		b.fireWatchers()
	}
	removed := b.TopicTable.apply(v, propsChanged, func(t *Topic, ct *controller.Topic) { b.openAssigned(t, ct, v) }, b.removeReplicaFiles)

	// Files and offsets go after the table lock is released: the group
	// coordinator's loops look topics up.
	for _, t := range removed {
		if err := os.RemoveAll(b.topicDir(t.Name(), t.ID())); err != nil {
			b.logger.Warn("removing deleted topic's files", "topic", t.Name(), "err", err)
		}
		if c := b.groups.Load(); c != nil {
			c.TopicDeleted(t.Name())
		}
	}
	b.ctrl.markReconciled(v.Index())
}

// mirrorProperties copies the controller's cluster properties into the
// values the broker reads on its hot paths.
func (b *Broker) mirrorProperties(v *controller.View) {
	explicit := map[string]string{}
	for name, pv := range v.Properties() {
		explicit[name] = pv.Value
	}
	if err := b.props.Replace(explicit); err != nil {
		b.logger.Warn("cluster properties from the controller", "err", err)
	}
}

func (c *controllerNode) markReconciled(index uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if index > c.reconciled {
		c.reconciled = index
		close(c.progress)
		c.progress = make(chan struct{})
	}
}

// SetClusterProperty changes one cluster property through the controller.
func (b *Broker) SetClusterProperty(name, value string) error {
	_, err := b.ctrl.propose(controller.SetClusterProperties{ExpectedVersion: -1, Changes: []controller.PropertyChange{{Name: name, Value: value}}})
	return err
}
