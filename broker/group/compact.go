package group

import (
	"github.com/weir-broker/weir/log"
)

// Compacting __consumer_offsets. Kafka compacts the topic by key; weir's
// log deletes whole segments only, so the coordinator bounds the topic
// itself: when a partition has grown past its limit it rewrites the live
// state of every group in it (current offsets and metadata) at the end of
// the log and then drops everything before the point where it started.
// Every record below that point is superseded by a record above it, so a
// replay from the new start yields the same state.

// Compactor is the part of a Store that compaction needs.
type Compactor interface {
	// Size is the partition's size in bytes; EndOffset its next offset.
	Size(partition int32) int64
	EndOffset(partition int32) int64
	// TrimBefore drops records below offset (whole segments at least).
	TrimBefore(partition int32, offset int64) error
}

// Compact rewrites and trims every partition larger than both minBytes
// and twice its size after its previous compaction.
func (c *Coordinator) Compact(minBytes int64) {
	comp, ok := c.opts.Store.(Compactor)
	if !ok {
		return
	}
	for p := int32(0); p < c.opts.Store.Partitions(); p++ {
		size := comp.Size(p)
		c.mu.Lock()
		floor := c.compactedSize[p]
		c.mu.Unlock()
		if size < minBytes || size < 2*floor {
			continue
		}
		if err := c.compactPartition(comp, p); err != nil {
			c.logger.Warn("compacting __consumer_offsets", "partition", p, "err", err)
			continue
		}
		c.mu.Lock()
		c.compactedSize[p] = comp.Size(p)
		c.mu.Unlock()
	}
}

func (c *Coordinator) compactPartition(comp Compactor, p int32) error {
	// The trim point is taken under the table lock together with the list
	// of groups: a group created later writes everything it has above
	// the trim point.
	c.mu.Lock()
	var groups []*group
	for id, g := range c.groups {
		if partitionFor(id, c.opts.Store.Partitions()) == p {
			groups = append(groups, g)
		}
	}
	trimAt := comp.EndOffset(p)
	c.mu.Unlock()
	for _, g := range groups {
		var err error
		g.do(func() { err = g.rewrite() })
		if err != nil {
			return err
		}
	}
	if err := comp.TrimBefore(p, trimAt); err != nil {
		return err
	}
	c.logger.Info("compacted __consumer_offsets", "partition", p, "groups", len(groups), "start_offset", trimAt)
	return nil
}

// rewrite appends the group's whole live state.
func (g *group) rewrite() error {
	if g.state == Dead {
		return nil
	}
	var records []log.KeyValue
	for t, ps := range g.offsets {
		for p, o := range ps {
			records = append(records, log.KeyValue{Key: offsetKey(g.id, t, p), Value: offsetValue(o)})
		}
	}
	if g.hadMembers {
		records = append(records, log.KeyValue{Key: groupKey(g.id), Value: g.metadataValue().AppendTo(nil)})
	}
	if len(records) == 0 {
		return nil
	}
	return g.c.append(g.id, records)
}
