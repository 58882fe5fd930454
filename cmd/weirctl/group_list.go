package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl group list: the groups every broker coordinates, with their state,
// protocol type and member count, optionally filtered by state.

// groupStates are the states a group can report. The classic protocol uses
// the first five; the rest belong to KIP-848 consumer groups and are accepted
// so the filter works against any Kafka-compatible cluster.
var groupStates = []string{
	"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead",
	"Assigning", "Reconciling", "NotReady",
}

// parseStates maps user input to canonical state names, case-insensitively,
// so `--state stable` works and a typo fails instead of matching nothing.
func parseStates(in []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, raw := range in {
		for _, s := range strings.Split(raw, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			canon := ""
			for _, known := range groupStates {
				if strings.EqualFold(s, known) {
					canon = known
					break
				}
			}
			if canon == "" {
				return nil, fmt.Errorf("--state %q: want one of %s", s, strings.Join(groupStates, ", "))
			}
			if !seen[canon] {
				seen[canon] = true
				out = append(out, canon)
			}
		}
	}
	return out, nil
}

// groupSummary is the JSON shape of one line of `group list`.
type groupSummary struct {
	Group string `json:"group"`
	State string `json:"state"`
	// GroupType is "consumer" (KIP-848) or "classic", as ListGroups v5
	// reports it; from an older broker, "classic" once DescribeGroups
	// described the group.
	GroupType     string `json:"group_type"`
	ProtocolType  string `json:"protocol_type"`
	Members       int    `json:"members"` // -1 when the group could not be described, or is of another type
	CoordinatorID int32  `json:"coordinator_id"`
	Error         string `json:"error,omitempty"`
	ErrorMessage  string `json:"error_message,omitempty"`
}

func newGroupListCommand(g *cli.Options) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List consumer groups",
		Long: "List the groups every broker coordinates, with their state, type (consumer\n" +
			"for the KIP-848 consumer protocol, classic for JoinGroup/SyncGroup),\n" +
			"protocol type and member count. --state keeps only groups in the given\n" +
			"states (Empty, Stable, PreparingRebalance, CompletingRebalance, Dead;\n" +
			"consumer-protocol groups also Assigning, Reconciling).",
		Example: "  weirctl group list --state Empty,Stable",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := parseStates(states)
			if err != nil {
				return err
			}
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				// The filter goes to the broker (ListGroups v4+) and is
				// applied again locally, for brokers that ignore it.
				listed, listErr := adm.ListGroups(ctx, filter...)
				if listErr != nil && len(listed) == 0 {
					return g.DescribeCallErr("list groups", listErr)
				}
				// Each group is described by the API of its type:
				// DescribeGroups answers a consumer-protocol group as
				// not found.
				var classic, consumer []string
				for _, l := range listed.Sorted() {
					switch l.GroupType {
					case groupTypeConsumer:
						consumer = append(consumer, l.Group)
					case groupTypeClassic, "":
						classic = append(classic, l.Group)
					}
				}
				var described kadm.DescribedGroups
				var cdescribed kadm.DescribedConsumerGroups
				var descErr, cdescErr error
				if len(classic) > 0 {
					described, descErr = adm.DescribeGroups(ctx, classic...)
				}
				if len(consumer) > 0 {
					cdescribed, cdescErr = adm.DescribeConsumerGroups(ctx, consumer...)
				}
				if len(listed) > 0 && len(described) == 0 && len(cdescribed) == 0 {
					if descErr != nil {
						return g.DescribeCallErr("describe groups", descErr)
					}
					if cdescErr != nil {
						return g.DescribeCallErr("describe consumer groups", cdescErr)
					}
				}
				err := printGroupList(cmd.OutOrStdout(), g.Format, buildGroupSummaries(listed, described, cdescribed, filter))
				switch {
				case err != nil:
					return err
				case listErr != nil:
					return g.DescribeCallErr("list groups (partial answer)", listErr)
				case descErr != nil:
					return g.DescribeCallErr("describe groups (partial answer)", descErr)
				case cdescErr != nil:
					return g.DescribeCallErr("describe consumer groups (partial answer)", cdescErr)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only groups in these states (comma-separated, repeatable)")
	return cmd
}

// buildGroupSummaries joins ListGroups with DescribeGroups (classic groups)
// and ConsumerGroupDescribe (consumer-protocol groups): the list names the
// groups and their type, the descriptions supply the member count and, for
// brokers whose ListGroups predates states, the state. A group of another
// type is listed with members -1 and no error.
func buildGroupSummaries(listed kadm.ListedGroups, described kadm.DescribedGroups, cdescribed kadm.DescribedConsumerGroups, filter []string) []groupSummary {
	out := make([]groupSummary, 0, len(listed))
	for _, l := range listed.Sorted() {
		s := groupSummary{
			Group:         l.Group,
			State:         l.State,
			GroupType:     l.GroupType,
			ProtocolType:  l.ProtocolType,
			Members:       -1,
			CoordinatorID: l.Coordinator,
		}
		switch l.GroupType {
		case groupTypeConsumer:
			summarizeConsumerGroup(&s, cdescribed)
		case groupTypeClassic, "":
			summarizeClassicGroup(&s, described)
		default:
			// Another kind of group (Kafka's share and streams
			// groups): listed as the broker lists it, members
			// unknown.
		}
		if len(filter) > 0 && !containsFold(filter, s.State) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func summarizeClassicGroup(s *groupSummary, described kadm.DescribedGroups) {
	d, ok := described[s.Group]
	switch {
	case !ok:
		s.Error = "MISSING_RESPONSE"
		s.ErrorMessage = "broker did not describe this group"
	case d.Err != nil:
		s.Error = cli.KafkaErrName(d.Err)
		s.ErrorMessage = cli.KafkaErrDetail(d.Err, d.ErrMessage)
	default:
		s.Members = len(d.Members)
		if d.State != "" {
			s.State = d.State
		}
		if d.ProtocolType != "" {
			s.ProtocolType = d.ProtocolType
		}
		if s.GroupType == "" && d.State != "Dead" {
			s.GroupType = groupTypeClassic
		}
	}
}

func summarizeConsumerGroup(s *groupSummary, described kadm.DescribedConsumerGroups) {
	d, ok := described[s.Group]
	switch {
	case !ok:
		s.Error = "MISSING_RESPONSE"
		s.ErrorMessage = "broker did not describe this group"
	case d.Err != nil:
		s.Error = cli.KafkaErrName(d.Err)
		s.ErrorMessage = cli.KafkaErrDetail(d.Err, "")
	default:
		s.Members = len(d.Members)
		if d.State != "" {
			s.State = d.State
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func printGroupList(w io.Writer, format string, groups []groupSummary) error {
	if groups == nil {
		groups = []groupSummary{} // JSON [] rather than null
	}
	var failed []string
	for _, s := range groups {
		if s.Error != "" {
			failed = append(failed, s.Group+": "+s.Error)
		}
	}
	var err error
	if format != cli.FormatTable {
		err = cli.WriteDocument(w, format, groups)
	} else {
		t := cli.NewTable("GROUP", "STATE", "GROUP-TYPE", "PROTOCOL-TYPE", "MEMBERS")
		for _, s := range groups {
			members := "-"
			if s.Members >= 0 {
				members = strconv.Itoa(s.Members)
			}
			t.Row(s.Group, s.State, orDash(s.GroupType), orDash(s.ProtocolType), members)
		}
		err = t.Write(w)
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not describe %d groups: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}
