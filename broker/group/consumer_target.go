package group

import (
	"slices"
	"sort"

	"github.com/weir-broker/weir/broker/group/assign"
	"github.com/weir-broker/weir/log"
)

// resolveRegexes resolves the regular expressions the group's members
// (with m in place of its id, replaced left out) subscribe to, against
// the topics now. It returns them with records for those new, changed or
// no longer used, and the catalog index they were resolved at.
func (g *group) resolveRegexes(cg *consumerGroup, replaced string, m *cgMember) (map[string]*resolvedRegex, uint64, []log.KeyValue) {
	used := map[string]bool{}
	for id, x := range cg.members {
		if id != replaced && id != m.id && x.regex != nil {
			used[*x.regex] = true
		}
	}
	if m.regex != nil {
		used[*m.regex] = true
	}
	if len(used) == 0 && len(cg.regexes) == 0 {
		return cg.regexes, cg.topicsIndex, nil
	}
	cat := g.c.opts.Topics
	index := cat.Index()
	var names []string
	out := make(map[string]*resolvedRegex, len(used))
	var records []log.KeyValue
	for expr := range used {
		prev := cg.regexes[expr]
		if prev != nil && cg.topicsIndex == index {
			out[expr] = prev
			continue
		}
		if names == nil {
			names = cat.Names()
		}
		re, err := compileTopicRegex(expr)
		if err != nil {
			continue // validated when it was subscribed
		}
		var topics []string
		for _, n := range names {
			if re.MatchString(n) {
				topics = append(topics, n)
			}
		}
		sort.Strings(topics)
		if prev != nil && slices.Equal(prev.topics, topics) {
			out[expr] = prev
			continue
		}
		r := &resolvedRegex{topics: topics, version: int64(index), timestamp: g.c.now().UnixMilli()}
		out[expr] = r
		records = append(records, cgRegexRecord(g.id, expr, &cgRegex{Topics: topics, Version: r.version, TimestampMs: r.timestamp}))
	}
	for expr := range cg.regexes {
		if !used[expr] {
			records = append(records, cgRegexRecord(g.id, expr, nil))
		}
	}
	return out, index, records
}

// computeTarget runs the group's assignor over members and returns the
// new target assignment with the records of what changed in it.
func (g *group) computeTarget(current map[string]partitions, members map[string]*cgMember, regexes map[string]*resolvedRegex, epoch int32, s Settings) (map[string]partitions, []log.KeyValue) {
	cat := g.c.opts.Topics
	name := (&consumerGroup{members: members}).preferredAssignor(s.defaultAssignor())
	assignor := assign.ByName(name)
	if assignor == nil {
		assignor = assign.ByName(s.defaultAssignor())
	}
	topics := map[assign.TopicID]assign.Topic{}
	input := make([]assign.Member, 0, len(members))
	for _, id := range sortedKeys(members) {
		x := members[id]
		am := assign.Member{ID: id, Current: current[id]}
		if x.instanceID != nil {
			am.InstanceID = *x.instanceID
		}
		if x.rackID != nil {
			am.Rack = *x.rackID
		}
		names := x.topics
		if x.regex != nil && regexes[*x.regex] != nil {
			names = regexes[*x.regex].topics
		}
		for _, n := range names {
			tid, parts, ok := cat.ByName(n)
			if !ok {
				continue
			}
			am.Topics = append(am.Topics, tid)
			topics[tid] = assign.Topic{ID: tid, Name: n, Partitions: parts}
		}
		input = append(input, am)
	}
	result := assignor.Assign(input, topics)
	target := make(map[string]partitions, len(members))
	var records []log.KeyValue
	for _, id := range sortedKeys(members) {
		a := partitions(result[id])
		if a == nil {
			a = partitions{}
		}
		for t, ps := range a {
			if len(ps) == 0 {
				delete(a, t)
			}
		}
		target[id] = a
		if prev, ok := current[id]; !ok || !equalPartitions(prev, a) {
			records = append(records, cgTargetMemberRecord(g.id, id, &cgTargetMember{TopicPartitions: toTopicPartitions(a)}))
		}
	}
	records = append(records, cgTargetMetadataRecord(g.id, &cgTargetMetadata{AssignmentEpoch: epoch}))
	g.c.logger.Info("consumer group target assignment computed", "group", g.id, "epoch", epoch, "assignor", assignor.Name(), "members", len(members))
	return target, records
}
