package group

import (
	"fmt"

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

// Compact rewrites and trims every loaded partition larger than both
// minBytes and twice its size after its previous compaction. Only a
// loaded partition's groups are all in memory; compacting any other
// would trim records nothing rewrote.
func (c *Coordinator) Compact(minBytes int64) {
	comp, ok := c.opts.Store.(Compactor)
	if !ok {
		return
	}
	for p := int32(0); p < c.opts.Store.Partitions(); p++ {
		c.mu.Lock()
		serving := c.servingLocked(p) == 0
		floor := c.compactedSize[p]
		c.mu.Unlock()
		if !serving {
			continue
		}
		size := comp.Size(p)
		if size < minBytes || size < 2*floor {
			continue
		}
		gen, err := c.compactPartition(comp, p)
		if err != nil {
			c.logger.Warn("compacting __consumer_offsets", "partition", p, "err", err)
			continue
		}
		if gen == 0 {
			continue
		}
		c.mu.Lock()
		if pl := c.parts[p]; pl != nil && pl.gen == gen {
			c.compactedSize[p] = comp.Size(p)
		}
		c.mu.Unlock()
	}
}

// compactPartition compacts p if it is loaded and returns the load
// generation it compacted (0: it did not).
func (c *Coordinator) compactPartition(comp Compactor, p int32) (uint64, error) {
	// The trim point is taken under the table lock together with the list
	// of groups and the check that p is loaded: a group created later
	// writes everything it has above the trim point.
	partitions := c.opts.Store.Partitions()
	c.mu.Lock()
	if c.servingLocked(p) != 0 {
		c.mu.Unlock()
		return 0, nil
	}
	gen := c.parts[p].gen
	var groups []*group
	for id, g := range c.groups {
		if partitionFor(id, partitions) == p {
			groups = append(groups, g)
		}
	}
	trimAt := comp.EndOffset(p)
	c.mu.Unlock()
	for _, g := range groups {
		var err error
		if !g.do(func() { err = g.rewrite() }) && g.stopErr(0) != 0 {
			// Unloaded or closed before it rewrote itself: below the
			// trim point are its only records. (A deleted group wrote
			// its tombstones above it.)
			return 0, fmt.Errorf("group %s stopped during compaction", g.id)
		}
		if err != nil {
			return 0, err
		}
	}
	// A load that started meanwhile may be replaying p; trimming under
	// it gains nothing and may fail its reads.
	c.mu.Lock()
	same := c.servingLocked(p) == 0 && c.parts[p].gen == gen
	c.mu.Unlock()
	if !same {
		return 0, nil
	}
	if err := comp.TrimBefore(p, trimAt); err != nil {
		return 0, err
	}
	c.logger.Info("compacted __consumer_offsets", "partition", p, "groups", len(groups), "start_offset", trimAt)
	return gen, nil
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
