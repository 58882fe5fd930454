package main

import (
	"context"
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

type groupMember struct {
	MemberID   string          `json:"member_id"`
	InstanceID *string         `json:"instance_id"`
	ClientID   string          `json:"client_id"`
	Host       string          `json:"host"`
	Assignment []assignedTopic `json:"assignment"`
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

// groupDescription is the JSON shape of one group in `group describe`.
//
// There is no generation: the classic protocol's DescribeGroups does not
// carry one, and the generation inside a member's subscription is the one it
// had before the last rebalance, which would mislead.
type groupDescription struct {
	Group           string           `json:"group"`
	State           string           `json:"state"`
	ProtocolType    string           `json:"protocol_type"`
	Protocol        string           `json:"protocol"`
	CoordinatorID   int32            `json:"coordinator_id"`
	CoordinatorAddr string           `json:"coordinator_addr"`
	MemberCount     int              `json:"member_count"`
	TotalLag        int64            `json:"total_lag"`
	Members         []groupMember    `json:"members"`
	Partitions      []groupPartition `json:"partitions"`
	Error           string           `json:"error,omitempty"`
	ErrorMessage    string           `json:"error_message,omitempty"`
}

func newGroupDescribeCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:     "describe GROUP...",
		Aliases: []string{"info"},
		Short:   "Show a group's members, committed offsets and lag",
		Long: "Show each group's state, protocol, coordinator and members (with the\n" +
			"partitions assigned to them), and for every partition the group is\n" +
			"assigned or has committed to: the committed offset, the log end offset\n" +
			"(high watermark), the lag and the owning member. Groups without members\n" +
			"still show their committed offsets and lag.",
		Example: "  weirctl group describe audit billing --format json | jq '.[].total_lag'",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names := dedupe(args)
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				lags, err := adm.Lag(ctx, names...)
				if err != nil && len(lags) == 0 {
					return g.DescribeCallErr("describe groups", err)
				}
				descs := make([]groupDescription, 0, len(names))
				for _, name := range names {
					descs = append(descs, buildGroupDescription(name, lags))
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
	for _, m := range l.Members {
		gm := groupMember{
			MemberID:   m.MemberID,
			InstanceID: m.InstanceID,
			ClientID:   m.ClientID,
			Host:       m.ClientHost,
			Assignment: []assignedTopic{},
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
	summary.Row("STATE", d.State)
	summary.Row("PROTOCOL-TYPE", d.ProtocolType)
	summary.Row("PROTOCOL", d.Protocol)
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
		mt := cli.NewTable("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT")
		for _, m := range d.Members {
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			mt.Row(m.MemberID, inst, m.ClientID, m.Host, formatAssignment(m.Assignment))
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
