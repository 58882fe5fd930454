package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl group describe: a group's state, coordinator, members and their
// assignments, and per-partition committed offsets and lag.

type assignedTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// groupMember is one member of a described group. The fields a classic
// group's DescribeGroups does not carry (rack, member epoch, target
// assignment, subscribed regex) are null for its members.
type groupMember struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	Rack       *string `json:"rack"`
	ClientID   string  `json:"client_id"`
	Host       string  `json:"host"`
	// MemberEpoch is a consumer-protocol member's epoch: behind the
	// group's target assignment epoch while it reconciles.
	MemberEpoch *int32 `json:"member_epoch"`
	// SubscribedTopics are the topic names the member subscribed to (for
	// a classic member, from its JoinGroup metadata);
	// SubscribedTopicRegex is a consumer-protocol member's regular
	// expression subscription.
	SubscribedTopics     []string `json:"subscribed_topics"`
	SubscribedTopicRegex *string  `json:"subscribed_topic_regex"`
	// Assignment is what the member owns now; TargetAssignment what the
	// coordinator's assignor wants it to own (consumer protocol only).
	// They differ while the group reconciles.
	Assignment       []assignedTopic `json:"assignment"`
	TargetAssignment []assignedTopic `json:"target_assignment"`
}

// groupPartition is one committed or assigned partition. Offsets the broker
// could not supply are -1, as in `topic describe`; a committed offset of -1
// means the group has not committed for the partition.
type groupPartition struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	CommittedOffset int64  `json:"committed_offset"`
	LogStartOffset  int64  `json:"log_start_offset"`
	LogEndOffset    int64  `json:"log_end_offset"`
	Lag             int64  `json:"lag"`
	MemberID        string `json:"member_id"`
	Error           string `json:"error,omitempty"`
}

// Group types, as ListGroups v5 reports them: a group of the KIP-848
// consumer protocol (described by ConsumerGroupDescribe) or of the classic
// JoinGroup/SyncGroup protocol (described by DescribeGroups).
const (
	groupTypeConsumer = "consumer"
	groupTypeClassic  = "classic"
)

// groupDescription is the JSON shape of one group in `group describe`.
//
// There is no generation for a classic group: DescribeGroups does not carry
// one, and the generation inside a member's subscription is the one it had
// before the last rebalance, which would mislead. A consumer-protocol group
// has its epochs instead (null for a classic group).
type groupDescription struct {
	Group     string `json:"group"`
	GroupType string `json:"group_type"`
	State     string `json:"state"`
	// ProtocolType and Protocol are DescribeGroups' for a classic group;
	// a consumer-protocol group is "consumer" and its assignor.
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	// Assignor is the partition assignor: the server-side one of a
	// consumer-protocol group, the one the members of a classic consumer
	// group agreed on.
	Assignor              string           `json:"assignor"`
	GroupEpoch            *int32           `json:"group_epoch"`
	TargetAssignmentEpoch *int32           `json:"target_assignment_epoch"`
	CoordinatorID         int32            `json:"coordinator_id"`
	CoordinatorAddr       string           `json:"coordinator_addr"`
	MemberCount           int              `json:"member_count"`
	TotalLag              int64            `json:"total_lag"`
	Members               []groupMember    `json:"members"`
	Partitions            []groupPartition `json:"partitions"`
	Error                 string           `json:"error,omitempty"`
	ErrorMessage          string           `json:"error_message,omitempty"`
}

func newGroupDescribeCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:     "describe GROUP...",
		Aliases: []string{"info"},
		Short:   "Show a group's members, committed offsets and lag",
		Long: "Show each group's type, state, assignor, coordinator and members (with the\n" +
			"partitions assigned to them), and for every partition the group is\n" +
			"assigned or has committed to: the committed offset, the log end offset\n" +
			"(high watermark), the lag and the owning member. Groups without members\n" +
			"still show their committed offsets and lag.\n\n" +
			"A group of the consumer protocol (KIP-848) also shows its group epoch and\n" +
			"target assignment epoch, and each member's epoch, rack, subscription and\n" +
			"target assignment beside its current one: they differ while the group\n" +
			"reconciles. Each group is asked with ConsumerGroupDescribe first, and with\n" +
			"DescribeGroups when it is a classic group or the broker predates KIP-848.",
		Example: "  weirctl group describe audit billing --format json | jq '.[].total_lag'",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names := dedupe(args)
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				descs, err := describeGroups(ctx, adm, names)
				if descs == nil {
					return g.DescribeCallErr("describe groups", err)
				}
				if perr := printGroupDescriptions(cmd.OutOrStdout(), g.Format, descs); perr != nil {
					return perr
				}
				if err != nil {
					return g.DescribeCallErr("describe groups (partial answer)", err)
				}
				return nil
			})
		},
	}
}

// describeGroups describes names in order, as Kafka's admin client does:
// ConsumerGroupDescribe first, then DescribeGroups (with kadm's lag) for
// every group that is not a consumer-protocol group. It returns nil
// descriptions when nothing could be described, and otherwise the first
// error of a call that answered only in part.
func describeGroups(ctx context.Context, adm *kadm.Client, names []string) ([]groupDescription, error) {
	cgs, cgErr := adm.DescribeConsumerGroups(ctx, names...)
	// A coordinator's own error for a whole ConsumerGroupDescribe shard
	// (say, COORDINATOR_NOT_AVAILABLE once kgo's retries are spent) is
	// kept: DescribeGroups would answer a consumer group it cannot see
	// with GROUP_ID_NOT_FOUND, which would hide it.
	shardErrs := consumerDescribeShardErrs(cgErr)

	consumer := map[string]kadm.DescribedConsumerGroup{}
	var classic []string
	for _, name := range names {
		if cg, ok := cgs[name]; ok && !notConsumerGroup(cg.Err) {
			consumer[name] = cg
		} else {
			classic = append(classic, name)
		}
	}

	var lags kadm.DescribedGroupLags
	var classicErr error
	if len(classic) > 0 {
		lags, classicErr = adm.Lag(ctx, classic...)
		if classicErr != nil && len(lags) == 0 && len(consumer) == 0 {
			return nil, classicErr
		}
	}
	var cl consumerGroupLag
	if len(consumer) > 0 {
		cl = fetchConsumerGroupLag(ctx, adm, consumer)
	}

	descs := make([]groupDescription, 0, len(names))
	for _, name := range names {
		if cg, ok := consumer[name]; ok {
			descs = append(descs, buildConsumerGroupDescription(name, cg, cl))
			continue
		}
		d := buildGroupDescription(name, lags)
		if err := shardErrs[name]; err != nil && d.Error == cli.KafkaErrName(kerr.GroupIDNotFound) {
			d.Error = cli.KafkaErrName(err)
			d.ErrorMessage = "ConsumerGroupDescribe: " + cli.KafkaErrDetail(err, "")
		}
		descs = append(descs, d)
	}
	return descs, classicErr
}

// notConsumerGroup reports whether ConsumerGroupDescribe's error for a
// group means "ask DescribeGroups": the group is not a consumer-protocol
// group (or does not exist), or the coordinator does not serve the API.
func notConsumerGroup(err error) bool {
	return errors.Is(err, kerr.GroupIDNotFound) || errors.Is(err, kerr.UnsupportedVersion)
}

// consumerDescribeShardErrs maps each group of a failed ConsumerGroupDescribe
// shard to its Kafka error code. Other failures (no such API on the broker,
// a dropped connection) are not kept: DescribeGroups is asked and speaks for
// itself.
func consumerDescribeShardErrs(err error) map[string]error {
	out := map[string]error{}
	var se *kadm.ShardErrors
	if !errors.As(err, &se) {
		return out
	}
	for _, e := range se.Errs {
		var ke *kerr.Error
		req, ok := e.Req.(*kmsg.ConsumerGroupDescribeRequest)
		if !ok || !errors.As(e.Err, &ke) || notConsumerGroup(e.Err) {
			continue
		}
		for _, grp := range req.Groups {
			out[grp] = e.Err
		}
	}
	return out
}

// buildGroupDescription flattens kadm's lag result into the printed shape.
// A group the broker reports as Dead does not exist (DescribeGroups before v6
// says so with state Dead and no error code), so it is reported the way v6+
// reports it: GROUP_ID_NOT_FOUND.
func buildGroupDescription(name string, lags kadm.DescribedGroupLags) groupDescription {
	d := groupDescription{Group: name, Members: []groupMember{}, Partitions: []groupPartition{}}
	l, ok := lags[name]
	if !ok {
		d.Error = "MISSING_RESPONSE"
		d.ErrorMessage = "broker did not describe this group"
		return d
	}
	d.State = l.State
	d.ProtocolType = l.ProtocolType
	d.Protocol = l.Protocol
	d.CoordinatorID = l.Coordinator.NodeID
	if l.Coordinator.Host != "" {
		d.CoordinatorAddr = net.JoinHostPort(l.Coordinator.Host, strconv.Itoa(int(l.Coordinator.Port)))
	}
	switch {
	case l.DescribeErr != nil:
		d.Error = cli.KafkaErrName(l.DescribeErr)
		d.ErrorMessage = cli.KafkaErrDetail(l.DescribeErr, "")
		return d
	case l.FetchErr != nil:
		d.Error = cli.KafkaErrName(l.FetchErr)
		d.ErrorMessage = "fetching committed offsets: " + cli.KafkaErrDetail(l.FetchErr, "")
	case l.State == "Dead":
		d.Error = cli.KafkaErrName(kerr.GroupIDNotFound)
		d.ErrorMessage = "the broker reports the group as Dead: it does not exist"
	}
	if l.State != "Dead" {
		d.GroupType = groupTypeClassic
	}
	if l.ProtocolType == "consumer" {
		d.Assignor = l.Protocol
	}
	for _, m := range l.Members {
		gm := groupMember{
			MemberID:         m.MemberID,
			InstanceID:       m.InstanceID,
			ClientID:         m.ClientID,
			Host:             m.ClientHost,
			SubscribedTopics: []string{},
			Assignment:       []assignedTopic{},
		}
		if j, ok := m.Join.AsConsumer(); ok && j != nil {
			gm.SubscribedTopics = sortedStrings(j.Topics)
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			gm.Assignment = assignmentTopics(a)
		}
		d.Members = append(d.Members, gm)
	}
	d.MemberCount = len(d.Members)
	d.Partitions = lagPartitions(l.Lag)
	d.TotalLag = l.Lag.Total()
	return d
}

// assignmentTopics decodes a consumer-protocol assignment into sorted topics
// and partitions.
func assignmentTopics(a *kmsg.ConsumerMemberAssignment) []assignedTopic {
	out := []assignedTopic{}
	if a == nil {
		return out
	}
	for _, t := range a.Topics {
		ps := append([]int32{}, t.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, assignedTopic{Topic: t.Topic, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

func lagPartitions(l kadm.GroupLag) []groupPartition {
	out := []groupPartition{}
	for _, pl := range l.Sorted() {
		p := groupPartition{
			Topic:           pl.Topic,
			Partition:       pl.Partition,
			CommittedOffset: pl.Commit.At,
			LogStartOffset:  -1,
			LogEndOffset:    -1,
			Lag:             pl.Lag,
		}
		if p.CommittedOffset < 0 {
			p.CommittedOffset = -1
		}
		if pl.Start.Err == nil {
			p.LogStartOffset = pl.Start.Offset
		}
		if pl.End.Err == nil {
			p.LogEndOffset = pl.End.Offset
		}
		if pl.Member != nil {
			p.MemberID = pl.Member.MemberID
		}
		if pl.Err != nil {
			p.Error = cli.KafkaErrName(pl.Err)
		}
		out = append(out, p)
	}
	return out
}

// formatAssignment renders "orders[0 1 2] audit[3]".
func formatAssignment(ts []assignedTopic) string {
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		parts = append(parts, t.Topic+cli.CellString(t.Partitions))
	}
	return strings.Join(parts, " ")
}

func printGroupDescriptions(w io.Writer, format string, descs []groupDescription) error {
	failed := 0
	for _, d := range descs {
		if d.Error != "" {
			failed++
		}
	}
	var err error
	if format != cli.FormatTable {
		err = cli.WriteDocument(w, format, descs)
	} else {
		for i, d := range descs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			if err = printGroupDescriptionTable(w, d); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		var msgs []string
		for _, d := range descs {
			if d.Error != "" {
				msgs = append(msgs, d.Group+": "+d.Error)
			}
		}
		return fmt.Errorf("%d of %d groups failed: %s", failed, len(descs), strings.Join(msgs, ", "))
	}
	return nil
}

func printGroupDescriptionTable(w io.Writer, d groupDescription) error {
	summary := cli.NewTable()
	summary.Row("GROUP", d.Group)
	// A group that could not be described, or does not exist, has
	// nothing more to show than why.
	if d.Error != "" && (d.State == "" || d.State == "Dead") {
		summary.Row("ERROR", joinErr(d.Error, d.ErrorMessage))
		return summary.Write(w)
	}
	consumer := d.GroupType == groupTypeConsumer
	if d.GroupType != "" {
		summary.Row("GROUP-TYPE", d.GroupType)
	}
	summary.Row("STATE", d.State)
	if consumer {
		summary.Row("ASSIGNOR", d.Assignor)
		summary.Row("GROUP-EPOCH", epochCell(d.GroupEpoch))
		summary.Row("TARGET-ASSIGNMENT-EPOCH", epochCell(d.TargetAssignmentEpoch))
	} else {
		summary.Row("PROTOCOL-TYPE", d.ProtocolType)
		summary.Row("PROTOCOL", d.Protocol)
	}
	coord := strconv.Itoa(int(d.CoordinatorID))
	if d.CoordinatorAddr != "" {
		coord += " (" + d.CoordinatorAddr + ")"
	}
	summary.Row("COORDINATOR", coord)
	summary.Row("MEMBERS", d.MemberCount)
	summary.Row("TOTAL-LAG", d.TotalLag)
	if d.Error != "" {
		summary.Row("ERROR", joinErr(d.Error, d.ErrorMessage))
	}
	if err := summary.Write(w); err != nil {
		return err
	}

	if len(d.Members) > 0 {
		fmt.Fprintln(w)
		var mt *cli.Table
		if consumer {
			mt = cli.NewTable("MEMBER-ID", "INSTANCE-ID", "RACK", "CLIENT-ID", "HOST", "EPOCH", "SUBSCRIPTION", "ASSIGNMENT", "TARGET-ASSIGNMENT")
		} else {
			mt = cli.NewTable("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT")
		}
		for _, m := range d.Members {
			if consumer {
				mt.Row(m.MemberID, optCell(m.InstanceID), optCell(m.Rack), m.ClientID, m.Host, epochCell(m.MemberEpoch),
					formatSubscription(m), assignmentCell(m.Assignment), assignmentCell(m.TargetAssignment))
			} else {
				mt.Row(m.MemberID, optCell(m.InstanceID), m.ClientID, m.Host, formatAssignment(m.Assignment))
			}
		}
		if err := mt.Write(w); err != nil {
			return err
		}
	}

	if len(d.Partitions) > 0 {
		fmt.Fprintln(w)
		pt := cli.NewTable("TOPIC", "PARTITION", "COMMITTED-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "ERROR")
		for _, p := range d.Partitions {
			member := p.MemberID
			if member == "" {
				member = "-"
			}
			pt.Row(p.Topic, p.Partition, offsetCell(p.CommittedOffset), offsetCell(p.LogEndOffset), offsetCell(p.Lag), member, p.Error)
		}
		if err := pt.Write(w); err != nil {
			return err
		}
	}
	return nil
}

func optCell(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func epochCell(e *int32) string {
	if e == nil {
		return "-"
	}
	return strconv.Itoa(int(*e))
}

// assignmentCell is formatAssignment, or "-" for nothing assigned.
func assignmentCell(ts []assignedTopic) string {
	if s := formatAssignment(ts); s != "" {
		return s
	}
	return "-"
}

// formatSubscription renders a member's subscription: its topic names
// comma-separated, and a regular expression between slashes ("/orders-.*/";
// a topic name cannot contain a slash).
func formatSubscription(m groupMember) string {
	parts := append([]string{}, m.SubscribedTopics...)
	if m.SubscribedTopicRegex != nil && *m.SubscribedTopicRegex != "" {
		parts = append(parts, "/"+*m.SubscribedTopicRegex+"/")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func sortedStrings(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	return out
}
