package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reconcile moves a member one step from its current assignment towards
// its target, as Kafka's CurrentAssignmentBuilder does:
//
//   - A member keeps the partitions it owns that are still its target.
//   - Partitions it owns that are no longer its target are revoked first:
//     it stays at its epoch (unrevoked) until a heartbeat's owned
//     partitions no longer list any of them.
//   - Only then does it move to the target epoch and get the partitions
//     of its target that no other member owns or is revoking; the rest
//     it waits for (unreleased), picking them up on later heartbeats.
//
// So no partition is ever owned by two members at once. owned is what
// the heartbeat reported (nil: not reported, which never proves a
// revocation); others holds every partition another member owns or is
// revoking. m is not modified; the result is m itself when nothing
// changes.
func reconcile(m *cgMember, targetEpoch int32, target partitions, others map[topicPartitionID]bool, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) (*cgMember, int16) {
	switch m.state {
	case memberStable:
		if m.epoch == targetEpoch {
			return m, 0
		}
		return nextAssignment(m, m.epoch, targetEpoch, target, others, owned), 0
	case memberUnrevoked:
		if ownsAny(owned, m.revoking) {
			return m, 0
		}
		return nextAssignment(m, m.epoch+1, targetEpoch, target, others, owned), 0
	case memberUnreleased:
		return nextAssignment(m, m.epoch, targetEpoch, target, others, owned), 0
	default:
		// A state this coordinator does not know (written by a newer
		// one): start the member over, as Kafka does.
		if owned == nil || len(owned) != 0 {
			return m, kerr.FencedMemberEpoch.Code
		}
		return nextAssignment(m, targetEpoch, targetEpoch, target, others, owned), 0
	}
}

func nextAssignment(m *cgMember, epoch, targetEpoch int32, target partitions, others map[topicPartitionID]bool, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *cgMember {
	assigned, revoking, pending := partitions{}, partitions{}, partitions{}
	unreleased := false
	for t := range unionTopics(target, m.assigned) {
		want, have := target[t], m.assigned[t]
		var keep, give, get []int32
		for _, p := range have {
			if _, ok := slices.BinarySearch(want, p); ok {
				keep = append(keep, p)
			} else {
				give = append(give, p)
			}
		}
		for _, p := range want {
			if _, ok := slices.BinarySearch(keep, p); ok {
				continue
			}
			if others[topicPartitionID{t, p}] {
				unreleased = true
				continue
			}
			get = append(get, p)
		}
		if len(keep) > 0 {
			assigned[t] = keep
		}
		if len(give) > 0 {
			revoking[t] = give
		}
		if len(get) > 0 {
			pending[t] = get
		}
	}
	n := m.clone()
	n.revoking = partitions{}
	switch {
	case len(revoking) > 0 && ownsAny(owned, revoking):
		n.state = memberUnrevoked
		n.setEpoch(epoch)
		n.assigned, n.revoking = assigned, revoking
		return n
	case len(pending) > 0:
		for t, ps := range pending {
			merged := append(assigned[t], ps...)
			slices.Sort(merged)
			assigned[t] = merged
		}
	}
	n.state = memberStable
	if unreleased {
		n.state = memberUnreleased
	}
	n.setEpoch(targetEpoch)
	n.assigned = assigned
	if n.state == m.state && n.epoch == m.epoch && n.prevEpoch == m.prevEpoch && equalPartitions(n.assigned, m.assigned) && len(m.revoking) == 0 {
		return m
	}
	return n
}

// setEpoch moves the member to epoch, remembering the one before.
func (m *cgMember) setEpoch(epoch int32) {
	if m.epoch != epoch {
		m.prevEpoch, m.epoch = m.epoch, epoch
	}
}

// ownsAny reports whether the heartbeat's owned partitions include any
// of ps; not reporting them (nil) counts as still owning them.
func ownsAny(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, ps partitions) bool {
	if owned == nil {
		return true
	}
	for _, t := range owned {
		have := ps[t.TopicID]
		for _, p := range t.Partitions {
			if _, ok := slices.BinarySearch(have, p); ok {
				return true
			}
		}
	}
	return false
}

// ownedWithin reports whether every partition the heartbeat says it owns
// is in ps (nil owned: nothing proven).
func ownedWithin(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, ps partitions) bool {
	if owned == nil {
		return false
	}
	for _, t := range owned {
		have, ok := ps[t.TopicID]
		if !ok && len(t.Partitions) > 0 {
			return false
		}
		for _, p := range t.Partitions {
			if _, ok := slices.BinarySearch(have, p); !ok {
				return false
			}
		}
	}
	return true
}

func unionTopics(a, b partitions) map[[16]byte]struct{} {
	out := make(map[[16]byte]struct{}, len(a)+len(b))
	for t := range a {
		out[t] = struct{}{}
	}
	for t := range b {
		out[t] = struct{}{}
	}
	return out
}
