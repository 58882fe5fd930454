package group

import (
	"crypto/rand"
	"encoding/base64"
	"hash/fnv"
	"slices"
	"sort"
	"time"

	"github.com/weir-broker/weir/broker/group/assign"
)

// ConsumerState is a consumer-protocol (KIP-848) group's state, named as
// ConsumerGroupDescribe and ListGroups name it.
type ConsumerState string

const (
	ConsumerEmpty       ConsumerState = "Empty"
	ConsumerAssigning   ConsumerState = "Assigning"   // the group epoch is ahead of the target assignment
	ConsumerReconciling ConsumerState = "Reconciling" // some member has not reached the target assignment
	ConsumerStable      ConsumerState = "Stable"
)

// memberState is where a member is in reaching its target assignment,
// with Kafka's values (they are stored in CurrentMemberAssignment records).
type memberState int8

const (
	memberStable     memberState = 0 // owns its whole target assignment at the target epoch
	memberUnrevoked  memberState = 1 // must give partitions up before its epoch moves
	memberUnreleased memberState = 2 // waits for partitions other members still own
	memberUnknown    memberState = 127
)

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	leaveEpoch       = -1 // the member leaves
	staticLeaveEpoch = -2 // a static member leaves and comes back within its session
)

// partitions is an assignment: topic id -> partitions, each list sorted.
type partitions = map[assign.TopicID][]int32

// cgMember is a member of a consumer-protocol group.
type cgMember struct {
	id         string
	instanceID *string
	rackID     *string
	clientID   string
	clientHost string

	topics           []string // subscribed topic names, sorted
	regex            *string  // subscribed regular expression
	rebalanceTimeout time.Duration
	assignor         *string // the server assignor the member asked for
	// classic is set while the member speaks the classic protocol in a
	// group migrated online (consumer_classic.go).
	classic *classicMeta

	epoch, prevEpoch int32
	state            memberState
	assigned         partitions // owned at epoch
	revoking         partitions // to give up before the epoch moves

	// Not stored: a restored member gets a fresh session.
	lastHeartbeat  time.Time
	revokeDeadline time.Time // zero unless unrevoked: fenced after it
	// classicDeadline is a classic member's join or sync timeout: told to
	// rejoin, it must within its rebalance timeout; having joined, it
	// must sync within it (Kafka's join and sync timers).
	classicDeadline time.Time
}

func (m *cgMember) clone() *cgMember {
	c := *m
	return &c
}

// reconciledTo: the member is stable at the target epoch.
func (m *cgMember) reconciledTo(epoch int32) bool {
	return m.state == memberStable && m.epoch == epoch
}

// consumerGroup is the state of a group that speaks the consumer
// protocol, held by its group's loop.
type consumerGroup struct {
	epoch        int32 // bumped by every change of members, subscriptions or their topics
	targetEpoch  int32 // the epoch the target assignment was computed at
	metadataHash int64 // of the subscribed topics' ids and partition counts
	target       map[string]partitions
	members      map[string]*cgMember
	static       map[string]string // instance id -> member id
	// regexes are the group's regular expression subscriptions resolved
	// against the topics (KIP-848 resolves them on the coordinator).
	regexes map[string]*resolvedRegex
	// topicsIndex is the catalog index the regexes were last resolved at.
	topicsIndex uint64
}

type resolvedRegex struct {
	topics    []string // sorted
	version   int64    // catalog index at resolution
	timestamp int64    // ms
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		target:  map[string]partitions{},
		members: map[string]*cgMember{},
		static:  map[string]string{},
		regexes: map[string]*resolvedRegex{},
	}
}

// state is the group's state as Kafka derives it.
func (cg *consumerGroup) state() ConsumerState {
	switch {
	case len(cg.members) == 0:
		return ConsumerEmpty
	case cg.epoch > cg.targetEpoch:
		return ConsumerAssigning
	}
	for _, m := range cg.members {
		if !m.reconciledTo(cg.targetEpoch) {
			return ConsumerReconciling
		}
	}
	return ConsumerStable
}

func (cg *consumerGroup) sortedMemberIDs() []string {
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// preferredAssignor is the server assignor most members asked for (ties
// to the first by name, so every coordinator picks the same), else def.
func (cg *consumerGroup) preferredAssignor(def string) string {
	counts := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != nil {
			counts[*m.assignor]++
		}
	}
	best, n := def, 0
	for name, c := range counts {
		if c > n || (c == n && name < best) {
			best, n = name, c
		}
	}
	return best
}

// heldByOthers is every partition a member other than skip owns or is
// revoking: none of them is free to assign to another member yet.
func heldByOthers(members map[string]*cgMember, skip string) map[topicPartitionID]bool {
	out := map[topicPartitionID]bool{}
	for id, m := range members {
		if id == skip {
			continue
		}
		for _, a := range []partitions{m.assigned, m.revoking} {
			for t, ps := range a {
				for _, p := range ps {
					out[topicPartitionID{t, p}] = true
				}
			}
		}
	}
	return out
}

type topicPartitionID struct {
	topic     assign.TopicID
	partition int32
}

// subscribedNames are the topic names the group consumes: every
// member's list and the topics its regex resolves to, with m in place of
// the member of its id (nil: the member of that id is left out).
func (cg *consumerGroup) subscribedNames(replace string, m *cgMember) map[string]bool {
	out := map[string]bool{}
	add := func(x *cgMember) {
		for _, t := range x.topics {
			out[t] = true
		}
		if x.regex != nil {
			if r := cg.regexes[*x.regex]; r != nil {
				for _, t := range r.topics {
					out[t] = true
				}
			}
		}
	}
	for id, x := range cg.members {
		if id != replace {
			add(x)
		}
	}
	if m != nil {
		add(m)
	}
	return out
}

// metadataHashOf hashes the subscribed topics' names, ids and partition
// counts: a change of any of them is a new group epoch, as in Kafka
// (whose hash function differs; the value is only compared with itself).
func metadataHashOf(names map[string]bool, cat Catalog) int64 {
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	h := fnv.New64a()
	for _, n := range sorted {
		id, parts, ok := cat.ByName(n)
		if !ok {
			continue
		}
		h.Write([]byte(n))
		h.Write(id[:])
		h.Write([]byte{byte(parts >> 24), byte(parts >> 16), byte(parts >> 8), byte(parts)})
	}
	return int64(h.Sum64())
}

// newConsumerMemberID is a member id as Kafka's coordinator makes one
// for v0 clients: a random UUID in URL-safe base64.
func newConsumerMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Assignment helpers. Lists are sorted and never hold empty entries.

func clonePartitions(a partitions) partitions {
	out := make(partitions, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func equalPartitions(a, b partitions) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func countPartitions(a partitions) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}
