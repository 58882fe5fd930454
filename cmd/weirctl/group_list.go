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
	Group         string `json:"group"`
	State         string `json:"state"`
	ProtocolType  string `json:"protocol_type"`
	Members       int    `json:"members"` // -1 when the group could not be described
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
		Long: "List the groups every broker coordinates, with their state, protocol type\n" +
			"and member count. --state keeps only groups in the given states\n" +
			"(Empty, Stable, PreparingRebalance, CompletingRebalance, Dead).",
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
				var described kadm.DescribedGroups
				var descErr error
				if names := listed.Groups(); len(names) > 0 {
					described, descErr = adm.DescribeGroups(ctx, names...)
					if descErr != nil && len(described) == 0 {
						return g.DescribeCallErr("describe groups", descErr)
					}
				}
				err := printGroupList(cmd.OutOrStdout(), g.Format, buildGroupSummaries(listed, described, filter))
				switch {
				case err != nil:
					return err
				case listErr != nil:
					return g.DescribeCallErr("list groups (partial answer)", listErr)
				case descErr != nil:
					return g.DescribeCallErr("describe groups (partial answer)", descErr)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only groups in these states (comma-separated, repeatable)")
	return cmd
}

// buildGroupSummaries joins ListGroups with DescribeGroups: the list names the
// groups, the description supplies the member count and, for brokers whose
// ListGroups predates states, the state.
func buildGroupSummaries(listed kadm.ListedGroups, described kadm.DescribedGroups, filter []string) []groupSummary {
	out := make([]groupSummary, 0, len(listed))
	for _, l := range listed.Sorted() {
		s := groupSummary{
			Group:         l.Group,
			State:         l.State,
			ProtocolType:  l.ProtocolType,
			Members:       -1,
			CoordinatorID: l.Coordinator,
		}
		d, ok := described[l.Group]
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
		}
		if len(filter) > 0 && !containsFold(filter, s.State) {
			continue
		}
		out = append(out, s)
	}
	return out
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
		t := cli.NewTable("GROUP", "STATE", "PROTOCOL-TYPE", "MEMBERS")
		for _, s := range groups {
			members := "-"
			if s.Members >= 0 {
				members = strconv.Itoa(s.Members)
			}
			t.Row(s.Group, s.State, s.ProtocolType, members)
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
