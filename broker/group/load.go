package group

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadedGroup accumulates one group's records during replay.
type loadedGroup struct {
	meta    *kmsg.GroupMetadataValue
	offsets map[string]map[int32]offset
}

// Load replays every partition of the store and starts the groups found
// there. Requests before it finishes get COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) Load() error {
	state := map[string]*loadedGroup{}
	get := func(id string) *loadedGroup {
		lg := state[id]
		if lg == nil {
			lg = &loadedGroup{offsets: map[string]map[int32]offset{}}
			state[id] = lg
		}
		return lg
	}
	var skipped int
	for p := int32(0); p < c.opts.Store.Partitions(); p++ {
		if c.opts.Owns != nil && !c.opts.Owns(p) {
			continue
		}
		err := c.opts.Store.Replay(p, func(key, value []byte) {
			r, ok, err := decodeRecord(key, value)
			if err != nil {
				skipped++
				return
			}
			if !ok {
				return
			}
			lg := get(r.group)
			switch {
			case r.isOffset && r.offset != nil:
				if lg.offsets[r.topic] == nil {
					lg.offsets[r.topic] = map[int32]offset{}
				}
				lg.offsets[r.topic][r.partition] = *r.offset
			case r.isOffset:
				delete(lg.offsets[r.topic], r.partition)
				if len(lg.offsets[r.topic]) == 0 {
					delete(lg.offsets, r.topic)
				}
			default:
				lg.meta = r.meta
			}
		})
		if err != nil {
			return fmt.Errorf("replaying __consumer_offsets partition %d: %w", p, err)
		}
	}
	if skipped > 0 {
		c.logger.Warn("skipped undecodable __consumer_offsets records", "records", skipped)
	}
	c.mu.Lock()
	for id, lg := range state {
		if lg.meta == nil && len(lg.offsets) == 0 {
			continue
		}
		g := newGroup(c, id)
		g.restore(lg)
		c.groups[id] = g
		go g.run()
	}
	n := len(c.groups)
	c.mu.Unlock()
	c.loaded.Store(true)
	c.logger.Info("group coordinator loaded", "groups", n)
	return nil
}

// restore rebuilds a group from its records. Members come back with a
// fresh session: they must heartbeat within their session timeout or be
// removed, as after a coordinator move in Kafka.
func (g *group) restore(lg *loadedGroup) {
	g.offsets = lg.offsets
	m := lg.meta
	if m == nil {
		g.publish()
		return
	}
	now := g.c.now()
	g.hadMembers = true
	g.protocolType, g.generation = m.ProtocolType, m.Generation
	if m.Protocol != nil {
		g.protocol = *m.Protocol
	}
	if m.Leader != nil {
		g.leader = *m.Leader
	}
	for _, vm := range m.Members {
		mm := &member{
			id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			protocolType:     m.ProtocolType,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			assignment:       vm.Assignment,
			lastHeartbeat:    now,
		}
		g.members[mm.id] = mm
		if mm.instanceID != nil {
			g.static[*mm.instanceID] = mm.id
		}
	}
	if len(g.members) > 0 {
		g.state = Stable
	}
	if m.CurrentStateTimestamp > 0 {
		g.stateSince = time.UnixMilli(m.CurrentStateTimestamp)
	}
	g.publish()
}
