package main

import (
	"context"
	"errors"
	"net"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// Groups of the KIP-848 consumer protocol in `group describe`: what
// ConsumerGroupDescribe says of them, with committed offsets and lag
// computed as kadm's Lag does for classic groups (which it cannot do for
// these: it describes with DescribeGroups).

// consumerGroupLag is what lag is computed from, for every consumer-protocol
// group described at once.
type consumerGroupLag struct {
	commits kadm.FetchOffsetsResponses
	starts  kadm.ListedOffsets
	ends    kadm.ListedOffsets
	// listErr is a failure to list log offsets other than some brokers
	// not answering (those partitions show errListMissing).
	listErr error
}

// fetchConsumerGroupLag fetches the groups' committed offsets, then the log
// start and end offsets of every topic they are assigned, targeted at,
// subscribed to or have committed to.
func fetchConsumerGroupLag(ctx context.Context, adm *kadm.Client, groups map[string]kadm.DescribedConsumerGroup) consumerGroupLag {
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	sort.Strings(names)
	l := consumerGroupLag{commits: adm.FetchManyOffsets(ctx, names...)}

	topics := kadm.TopicsSet{}
	for _, name := range names {
		cg := groups[name]
		topics.MergeTopics(consumerGroupTopics(cg))
		if c, ok := l.commits[name]; ok && c.Err == nil {
			topics.Merge(c.CommittedPartitions())
		}
	}
	list := topics.Topics()
	if len(list) == 0 {
		return l
	}
	for _, ls := range []struct {
		fn  func(context.Context, ...string) (kadm.ListedOffsets, error)
		dst *kadm.ListedOffsets
	}{
		{adm.ListStartOffsets, &l.starts},
		{adm.ListEndOffsets, &l.ends},
	} {
		listed, err := ls.fn(ctx, list...)
		*ls.dst = listed
		var se *kadm.ShardErrors
		if err != nil && !errors.As(err, &se) && l.listErr == nil {
			l.listErr = err
		}
	}
	return l
}

// consumerGroupTopics are the topics a consumer-protocol group's members
// own, are to own or subscribed to by name.
func consumerGroupTopics(cg kadm.DescribedConsumerGroup) []string {
	set := cg.AssignedPartitions()
	set.Merge(cg.TargetPartitions())
	set.MergeTopics(cg.SubscribedTopics())
	return set.Topics()
}

// buildConsumerGroupDescription flattens what ConsumerGroupDescribe said of
// a group, with its committed offsets and lag, into the printed shape.
func buildConsumerGroupDescription(name string, cg kadm.DescribedConsumerGroup, l consumerGroupLag) groupDescription {
	d := groupDescription{Group: name, Members: []groupMember{}, Partitions: []groupPartition{}}
	d.CoordinatorID = cg.Coordinator.NodeID
	if cg.Coordinator.Host != "" {
		d.CoordinatorAddr = net.JoinHostPort(cg.Coordinator.Host, strconv.Itoa(int(cg.Coordinator.Port)))
	}
	if cg.Err != nil {
		d.Error = cli.KafkaErrName(cg.Err)
		d.ErrorMessage = cli.KafkaErrDetail(cg.Err, "")
		return d
	}
	d.GroupType = groupTypeConsumer
	d.State = cg.State
	d.ProtocolType = "consumer"
	d.Protocol = cg.AssignorName
	d.Assignor = cg.AssignorName
	groupEpoch, targetEpoch := cg.Epoch, cg.AssignmentEpoch
	d.GroupEpoch, d.TargetAssignmentEpoch = &groupEpoch, &targetEpoch

	for _, m := range cg.Members {
		epoch := m.MemberEpoch
		d.Members = append(d.Members, groupMember{
			MemberID:             m.MemberID,
			InstanceID:           m.InstanceID,
			Rack:                 m.RackID,
			ClientID:             m.ClientID,
			Host:                 m.ClientHost,
			MemberEpoch:          &epoch,
			SubscribedTopics:     sortedStrings(m.SubscribedTopics),
			SubscribedTopicRegex: m.SubscribedTopicRegex,
			Assignment:           topicsSetAssignment(m.Assignment),
			TargetAssignment:     topicsSetAssignment(m.TargetAssignment),
		})
	}
	d.MemberCount = len(d.Members)

	commits, ok := l.commits[name]
	switch {
	case ok && commits.Err != nil:
		d.Error = cli.KafkaErrName(commits.Err)
		d.ErrorMessage = "fetching committed offsets: " + cli.KafkaErrDetail(commits.Err, "")
		return d
	case l.listErr != nil:
		d.Error = cli.KafkaErrName(l.listErr)
		d.ErrorMessage = "listing log offsets: " + cli.KafkaErrDetail(l.listErr, "")
	}
	d.Partitions = consumerLagPartitions(cg, commits.Fetched, l.starts, l.ends)
	for _, p := range d.Partitions {
		if p.Lag > 0 {
			d.TotalLag += p.Lag
		}
	}
	return d
}

// topicsSetAssignment is a member's assignment as sorted topics and
// partitions.
func topicsSetAssignment(s kadm.TopicsSet) []assignedTopic {
	out := []assignedTopic{}
	for _, t := range s.Sorted() {
		out = append(out, assignedTopic{Topic: t.Topic, Partitions: t.Partitions})
	}
	return out
}

// consumerLagPartitions is kadm.CalculateGroupLagWithStartOffsets for a
// consumer-protocol group: one row for every partition a member owns (its
// owner), every partition committed to, and every other listed partition of
// a topic the group owns, is to own, subscribed to or committed to (not
// consumed yet: all of it is lag). A partition being handed from one member
// to another, in a target assignment but in no current one, has no owner.
func consumerLagPartitions(cg kadm.DescribedConsumerGroup, commits kadm.OffsetResponses, starts, ends kadm.ListedOffsets) []groupPartition {
	owner := map[string]map[int32]string{}
	rows := kadm.TopicsSet{}
	for _, m := range cg.Members {
		m.Assignment.Each(func(t string, p int32) {
			if owner[t] == nil {
				owner[t] = map[int32]string{}
			}
			owner[t][p] = m.MemberID
			rows.Add(t, p)
		})
	}
	rows.Merge(commits.Partitions())
	rows.MergeTopics(consumerGroupTopics(cg))
	for t := range rows {
		for p := range ends[t] {
			if p >= 0 {
				rows.Add(t, p)
			}
		}
	}

	out := []groupPartition{}
	for _, tps := range rows.Sorted() {
		// A topic ListOffsets could not find is one -1 entry carrying
		// the error (UNKNOWN_TOPIC_OR_PARTITION), for all its rows.
		topicErr, _ := ends.Lookup(tps.Topic, -1)
		for _, p := range tps.Partitions {
			out = append(out, partitionLag(tps.Topic, p, owner[tps.Topic][p], commits, starts, ends, topicErr.Err))
		}
	}
	return out
}

// partitionLag is one row of consumerLagPartitions, by kadm's rules: the lag
// is the log end minus the committed offset, or minus the log start when
// nothing is committed, never below 0, and -1 when the log end or the
// commit is missing or failed.
func partitionLag(topic string, p int32, member string, commits kadm.OffsetResponses, starts, ends kadm.ListedOffsets, topicErr error) groupPartition {
	row := groupPartition{
		Topic: topic, Partition: p, MemberID: member,
		CommittedOffset: -1, LogStartOffset: -1, LogEndOffset: -1, Lag: -1,
	}
	commit, committed := commits.Lookup(topic, p)
	if committed && commit.At >= 0 {
		row.CommittedOffset = commit.At
	}
	if start, ok := starts.Lookup(topic, p); ok && start.Err == nil {
		row.LogStartOffset = start.Offset
	}
	end, listed := ends.Lookup(topic, p)
	var err error
	switch {
	case !listed && topicErr != nil:
		err = topicErr
	case !listed:
		err = errListMissing
	case committed && commit.Err != nil:
		err = commit.Err
	default:
		err = end.Err
	}
	if listed && end.Err == nil {
		row.LogEndOffset = end.Offset
	}
	if err != nil {
		row.Error = cli.KafkaErrName(err)
		return row
	}
	lag := end.Offset
	switch {
	case row.CommittedOffset >= 0:
		lag = end.Offset - row.CommittedOffset
	case row.LogStartOffset >= 0:
		lag = end.Offset - row.LogStartOffset
	}
	row.Lag = max(lag, 0)
	return row
}
