package group

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// maxOffsetMetadata is Kafka's offset.metadata.max.bytes.
const maxOffsetMetadata = 4096

// commitCode is OffsetCommit's group-level check, in Kafka's order: a
// commit with generation -1 is a standalone consumer's (or an admin's)
// and is allowed only while the group has no members.
func (g *group) commitCode(req *kmsg.OffsetCommitRequest) int16 {
	if g.cg != nil && g.state != Dead {
		return g.consumerCommitCode(req.MemberID, req.Generation, req.Version, false)
	}
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case req.InstanceID != nil && g.static[*req.InstanceID] != "" && g.static[*req.InstanceID] != req.MemberID:
		return kerr.FencedInstanceID.Code
	case req.Generation < 0 && g.state == Empty:
		return 0
	case g.state == CompletingRebalance:
		return kerr.RebalanceInProgress.Code
	case g.members[req.MemberID] == nil:
		return kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	return 0
}

func (g *group) commit(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	code := g.commitCode(req)
	now := g.c.now()
	if m := g.members[req.MemberID]; m != nil && code == 0 && g.cg == nil {
		m.lastHeartbeat = now // a commit is as good as a heartbeat
	}
	type pending struct {
		topic     string
		partition int32
		o         offset
		code      *int16
	}
	var writes []pending
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Partition = rp.Partition
			if sp.ErrorCode = code; code != 0 {
				continue
			}
			epoch := rp.LeaderEpoch
			if req.Version < 6 {
				epoch = -1
			}
			o, code := g.checkedOffset(rt.Topic, rp.Partition, rp.Offset, epoch, rp.Metadata, now.UnixMilli())
			if sp.ErrorCode = code; code == 0 {
				writes = append(writes, pending{rt.Topic, rp.Partition, o, &sp.ErrorCode})
			}
		}
	}
	if len(writes) == 0 {
		return
	}
	records := make([]log.KeyValue, len(writes))
	for i, w := range writes {
		records[i] = log.KeyValue{Key: offsetKey(g.id, w.topic, w.partition), Value: offsetValue(w.o)}
	}
	first, err := g.c.append(g.id, records)
	if err != nil {
		for _, w := range writes {
			*w.code = kerr.CoordinatorNotAvailable.Code
		}
		return
	}
	for i, w := range writes {
		w.o.logOffset = first + int64(i)
		g.setOffset(w.topic, w.partition, w.o)
	}
}

// checkedOffset is what a commit of one partition stores, or the code
// refusing it.
func (g *group) checkedOffset(topic string, partition int32, off int64, leaderEpoch int32, metadata *string, nowMs int64) (offset, int16) {
	switch {
	case metadata != nil && len(*metadata) > maxOffsetMetadata:
		return offset{}, kerr.OffsetMetadataTooLarge.Code
	case !g.c.opts.PartitionExists(topic, partition):
		return offset{}, kerr.UnknownTopicOrPartition.Code
	}
	o := offset{offset: off, leaderEpoch: leaderEpoch, commitTime: nowMs}
	if metadata != nil {
		o.metadata = *metadata
	}
	return o, 0
}

func (g *group) setOffset(topic string, partition int32, o offset) {
	ps := g.offsets[topic]
	if ps == nil {
		ps = map[int32]offset{}
		g.offsets[topic] = ps
	}
	ps[partition] = o
}

func (g *group) deleteOffset(topic string, partition int32) {
	if ps := g.offsets[topic]; ps != nil {
		delete(ps, partition)
		if len(ps) == 0 {
			delete(g.offsets, topic)
		}
	}
}

// fetchedPartition is one committed offset as OffsetFetch answers it; an
// uncommitted partition reads -1 with no error, as in Kafka.
func (g *group) fetchedPartition(topic string, partition int32) (off int64, epoch int32, metadata string) {
	o, ok := g.offsets[topic][partition]
	if !ok {
		return -1, -1, ""
	}
	return o.offset, o.leaderEpoch, o.metadata
}

// committedTopics lists every topic and partition with an offset, sorted.
func (g *group) committedTopics() map[string][]int32 {
	out := map[string][]int32{}
	for t, ps := range g.offsets {
		for p := range ps {
			out[t] = append(out[t], p)
		}
		sort.Slice(out[t], func(i, j int) bool { return out[t][i] < out[t][j] })
	}
	return out
}

// subscribedTopics are the topics the members' consumer-protocol
// subscriptions name; nil when the group does not use the consumer
// protocol.
func (g *group) subscribedTopics() map[string]bool {
	if g.cg != nil {
		return g.cg.subscribedNames("", nil)
	}
	if g.protocolType != "consumer" {
		return nil
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			continue
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}

// deleteOffsets is OffsetDelete: offsets of topics a live consumer group
// subscribes to stay (GROUP_SUBSCRIBED_TO_TOPIC).
func (g *group) deleteOffsets(req *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse) {
	if g.state == Dead {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return
	}
	var subscribed map[string]bool
	if !g.isEmpty() {
		if subscribed = g.subscribedTopics(); subscribed == nil {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return
		}
	}
	var targets []topicPartition
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case subscribed[rt.Topic]:
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case !g.c.opts.PartitionExists(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if _, ok := g.offsets[rt.Topic][rp.Partition]; ok {
					targets = append(targets, topicPartition{rt.Topic, rp.Partition})
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if err := g.removeOffsets(targets); err != nil {
		resp.ErrorCode, resp.Topics = kerr.CoordinatorNotAvailable.Code, nil
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// removeOffsets writes tombstones for the offsets, then forgets them.
func (g *group) removeOffsets(tps []topicPartition) error {
	if len(tps) == 0 {
		return nil
	}
	records := make([]log.KeyValue, len(tps))
	for i, tp := range tps {
		records[i] = log.KeyValue{Key: offsetKey(g.id, tp.topic, tp.partition)}
	}
	if _, err := g.c.append(g.id, records); err != nil {
		return err
	}
	for _, tp := range tps {
		g.deleteOffset(tp.topic, tp.partition)
	}
	return nil
}

// expireOffsets drops offsets of an empty group older than the
// retention (Kafka's offsets.retention.minutes, counted from when the
// group became empty, or from the commit for groups that never had
// members). It reports whether the group is now gone.
func (g *group) expireOffsets(now time.Time, retention time.Duration) (gone bool) {
	if g.state != Empty || retention <= 0 {
		return false
	}
	var expired []topicPartition
	for t, ps := range g.offsets {
		for p, o := range ps {
			base := g.stateSince.UnixMilli()
			if !g.hadMembers {
				base = o.commitTime
			}
			if base+retention.Milliseconds() <= now.UnixMilli() {
				expired = append(expired, topicPartition{t, p})
			}
		}
	}
	if err := g.removeOffsets(expired); err != nil {
		g.c.logger.Warn("expiring group offsets", "group", g.id, "err", err)
		return false
	}
	if len(expired) > 0 {
		g.c.logger.Info("expired group offsets", "group", g.id, "partitions", len(expired))
	}
	if len(g.offsets) > 0 {
		return false
	}
	return g.delete() == nil
}

// dropTopic removes the group's offsets of a deleted topic.
func (g *group) dropTopic(topic string) {
	if g.state == Dead {
		return
	}
	var tps []topicPartition
	for p := range g.offsets[topic] {
		tps = append(tps, topicPartition{topic, p})
	}
	if err := g.removeOffsets(tps); err != nil {
		g.c.logger.Warn("dropping offsets of a deleted topic", "group", g.id, "topic", topic, "err", err)
	}
}
