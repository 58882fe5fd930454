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
)

func newGroupCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "group",
		Aliases: []string{"groups"},
		Short:   "List, describe, delete and seek consumer groups",
	}
	cmd.AddCommand(
		newGroupListCommand(g),
		newGroupDescribeCommand(g),
		newGroupDeleteCommand(g),
		newGroupSeekCommand(g),
	)
	return cmd
}

// ---------------------------------------------------------------------------
// group list

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

func newGroupListCommand(g *globalOptions) *cobra.Command {
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
			return g.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				// The filter goes to the broker (ListGroups v4+) and is
				// applied again locally, for brokers that ignore it.
				listed, listErr := adm.ListGroups(ctx, filter...)
				if listErr != nil && len(listed) == 0 {
					return g.describeCallErr("list groups", listErr)
				}
				var described kadm.DescribedGroups
				var descErr error
				if names := listed.Groups(); len(names) > 0 {
					described, descErr = adm.DescribeGroups(ctx, names...)
					if descErr != nil && len(described) == 0 {
						return g.describeCallErr("describe groups", descErr)
					}
				}
				err := printGroupList(cmd.OutOrStdout(), g.format, buildGroupSummaries(listed, described, filter))
				switch {
				case err != nil:
					return err
				case listErr != nil:
					return g.describeCallErr("list groups (partial answer)", listErr)
				case descErr != nil:
					return g.describeCallErr("describe groups (partial answer)", descErr)
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
			s.Error = kafkaErrName(d.Err)
			s.ErrorMessage = kafkaErrDetail(d.Err, d.ErrMessage)
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
	if format == formatJSON {
		err = writeJSON(w, groups)
	} else {
		t := newTable("GROUP", "STATE", "PROTOCOL-TYPE", "MEMBERS")
		for _, s := range groups {
			members := "-"
			if s.Members >= 0 {
				members = strconv.Itoa(s.Members)
			}
			t.row(s.Group, s.State, s.ProtocolType, members)
		}
		err = t.write(w)
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not describe %d groups: %s", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

// ---------------------------------------------------------------------------
// group describe

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

func newGroupDescribeCommand(g *globalOptions) *cobra.Command {
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
			return g.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				lags, err := adm.Lag(ctx, names...)
				if err != nil && len(lags) == 0 {
					return g.describeCallErr("describe groups", err)
				}
				descs := make([]groupDescription, 0, len(names))
				for _, name := range names {
					descs = append(descs, buildGroupDescription(name, lags))
				}
				if perr := printGroupDescriptions(cmd.OutOrStdout(), g.format, descs); perr != nil {
					return perr
				}
				if err != nil {
					return g.describeCallErr("describe groups (partial answer)", err)
				}
				return nil
			})
		},
	}
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
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
		d.Error = kafkaErrName(l.DescribeErr)
		d.ErrorMessage = kafkaErrDetail(l.DescribeErr, "")
		return d
	case l.FetchErr != nil:
		d.Error = kafkaErrName(l.FetchErr)
		d.ErrorMessage = "fetching committed offsets: " + kafkaErrDetail(l.FetchErr, "")
	case l.State == "Dead":
		d.Error = kafkaErrName(kerr.GroupIDNotFound)
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
			p.Error = kafkaErrName(pl.Err)
		}
		out = append(out, p)
	}
	return out
}

// formatAssignment renders "orders[0 1 2] audit[3]".
func formatAssignment(ts []assignedTopic) string {
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		parts = append(parts, t.Topic+cellString(t.Partitions))
	}
	return strings.Join(parts, " ")
}

func offsetCell(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

func printGroupDescriptions(w io.Writer, format string, descs []groupDescription) error {
	failed := 0
	for _, d := range descs {
		if d.Error != "" {
			failed++
		}
	}
	var err error
	if format == formatJSON {
		err = writeJSON(w, descs)
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
	summary := newTable()
	summary.row("GROUP", d.Group)
	// A group that could not be described, or does not exist, has
	// nothing more to show than why.
	if d.Error != "" && (d.State == "" || d.State == "Dead") {
		summary.row("ERROR", joinErr(d.Error, d.ErrorMessage))
		return summary.write(w)
	}
	summary.row("STATE", d.State)
	summary.row("PROTOCOL-TYPE", d.ProtocolType)
	summary.row("PROTOCOL", d.Protocol)
	coord := strconv.Itoa(int(d.CoordinatorID))
	if d.CoordinatorAddr != "" {
		coord += " (" + d.CoordinatorAddr + ")"
	}
	summary.row("COORDINATOR", coord)
	summary.row("MEMBERS", d.MemberCount)
	summary.row("TOTAL-LAG", d.TotalLag)
	if d.Error != "" {
		summary.row("ERROR", joinErr(d.Error, d.ErrorMessage))
	}
	if err := summary.write(w); err != nil {
		return err
	}

	if len(d.Members) > 0 {
		fmt.Fprintln(w)
		mt := newTable("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT")
		for _, m := range d.Members {
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			mt.row(m.MemberID, inst, m.ClientID, m.Host, formatAssignment(m.Assignment))
		}
		if err := mt.write(w); err != nil {
			return err
		}
	}

	if len(d.Partitions) > 0 {
		fmt.Fprintln(w)
		pt := newTable("TOPIC", "PARTITION", "COMMITTED-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "ERROR")
		for _, p := range d.Partitions {
			member := p.MemberID
			if member == "" {
				member = "-"
			}
			pt.row(p.Topic, p.Partition, offsetCell(p.CommittedOffset), offsetCell(p.LogEndOffset), offsetCell(p.Lag), member, p.Error)
		}
		if err := pt.write(w); err != nil {
			return err
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// group delete

type groupResult struct {
	Group        string `json:"group"`
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

func newGroupDeleteCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "delete GROUP...",
		Aliases: []string{"rm"},
		Short:   "Delete consumer groups and their committed offsets",
		Long: "Delete groups with their committed offsets. The broker refuses groups\n" +
			"that still have members (NON_EMPTY_GROUP).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names := dedupe(args)
			return g.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.DeleteGroups(ctx, names...)
				var se *kadm.ShardErrors
				// A partial failure (say, no coordinator for one group)
				// is reported per group; when nothing got through, the
				// error itself is the news.
				if err != nil && (!errors.As(err, &se) || se.AllFailed) {
					return g.describeCallErr("delete groups", err)
				}
				return printGroupDeleteResults(cmd.OutOrStdout(), g.format, names, resps, se)
			})
		},
	}
}

// printGroupDeleteResults reports one line per requested group. Groups whose
// request never got an answer (for example, no coordinator could be found)
// carry the error of their shard.
func printGroupDeleteResults(w io.Writer, format string, names []string, resps kadm.DeleteGroupResponses, se *kadm.ShardErrors) error {
	shardErr := map[string]error{}
	if se != nil {
		for _, e := range se.Errs {
			if req, ok := e.Req.(*kmsg.DeleteGroupsRequest); ok {
				for _, grp := range req.Groups {
					shardErr[grp] = e.Err
				}
			}
		}
	}
	results := make([]groupResult, 0, len(names))
	failed := 0
	for _, name := range names {
		res := groupResult{Group: name}
		r, ok := resps[name]
		switch {
		case ok && r.Err != nil:
			res.Error = kafkaErrName(r.Err)
			res.ErrorMessage = kafkaErrDetail(r.Err, r.ErrMessage)
		case ok:
		case shardErr[name] != nil:
			res.Error = kafkaErrName(shardErr[name])
			res.ErrorMessage = kafkaErrDetail(shardErr[name], "")
		default:
			res.Error = "MISSING_RESPONSE"
			res.ErrorMessage = "broker did not answer for this group"
		}
		if res.Error != "" {
			failed++
		}
		results = append(results, res)
	}
	var err error
	if format == formatJSON {
		err = writeJSON(w, results)
	} else {
		t := newTable("GROUP", "STATUS")
		for _, r := range results {
			status := "OK"
			if r.Error != "" {
				status = joinErr(r.Error, r.ErrorMessage)
			}
			t.row(r.Group, status)
		}
		err = t.write(w)
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d groups failed", failed, len(names))
	}
	return nil
}

// ---------------------------------------------------------------------------
// group seek

type seekKind int

const (
	seekStart seekKind = iota
	seekEnd
	seekOffset
	seekTimestamp
)

type seekTarget struct {
	kind  seekKind
	value int64 // the offset or the timestamp in milliseconds
}

func (s seekTarget) String() string {
	switch s.kind {
	case seekStart:
		return "start"
	case seekEnd:
		return "end"
	case seekTimestamp:
		return "@" + strconv.FormatInt(s.value, 10)
	default:
		return strconv.FormatInt(s.value, 10)
	}
}

func parseSeekTarget(s string) (seekTarget, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "start", "oldest", "beginning", "earliest":
		return seekTarget{kind: seekStart}, nil
	case "end", "newest", "latest":
		return seekTarget{kind: seekEnd}, nil
	}
	if ts, ok := strings.CutPrefix(s, "@"); ok {
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || n < 0 {
			return seekTarget{}, fmt.Errorf("--to %q: want @ followed by a non-negative Unix timestamp in milliseconds", s)
		}
		return seekTarget{kind: seekTimestamp, value: n}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return seekTarget{}, fmt.Errorf("--to must be start, end, a non-negative OFFSET or @TIMESTAMP_MS; got %q", s)
	}
	return seekTarget{kind: seekOffset, value: n}, nil
}

// parseTopicList splits comma-separated topic names, dropping blanks and
// duplicates; a flag that was given but names nothing is an error rather than
// a silent "every topic".
func parseTopicList(in []string, given bool) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, raw := range in {
		for _, t := range strings.Split(raw, ",") {
			t = strings.TrimSpace(t)
			if t == "" || seen[t] {
				continue
			}
			seen[t] = true
			out = append(out, t)
		}
	}
	if given && len(out) == 0 {
		return nil, errors.New("--topics names no topic")
	}
	return out, nil
}

type seekRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Before is the committed offset before the seek, -1 if there was none.
	Before int64 `json:"before"`
	// After is the offset committed (or, with --dry-run, that would be
	// committed); -1 if none could be determined.
	After        int64  `json:"after"`
	Note         string `json:"note,omitempty"`
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

type seekResult struct {
	Group      string    `json:"group"`
	Target     string    `json:"target"`
	DryRun     bool      `json:"dry_run"`
	Partitions []seekRow `json:"partitions"`
}

type seekOptions struct {
	to     string
	topics []string
	dryRun bool
}

func newGroupSeekCommand(g *globalOptions) *cobra.Command {
	o := &seekOptions{}
	cmd := &cobra.Command{
		Use:   "seek GROUP --to start|end|OFFSET|@TIMESTAMP_MS",
		Short: "Move a group's committed offsets",
		Long: "Commit new offsets for GROUP: the log start, the log end, an exact OFFSET\n" +
			"(clamped to each partition's log start..end), or the first offset whose\n" +
			"record timestamp is at or after @TIMESTAMP_MS (the log end if none is).\n" +
			"Applies to every partition of --topics, or else to every partition the\n" +
			"group has committed offsets for. The group must have no active members:\n" +
			"stop its consumers first. Prints the offsets before and after.",
		Example: "  weirctl group seek audit --to start\n" +
			"  weirctl group seek audit --to @1717000000000 --topics orders,payments --dry-run",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.to == "" {
				return errors.New("--to is required: start, end, OFFSET or @TIMESTAMP_MS")
			}
			target, err := parseSeekTarget(o.to)
			if err != nil {
				return err
			}
			topics, err := parseTopicList(o.topics, cmd.Flags().Changed("topics"))
			if err != nil {
				return err
			}
			group := args[0]
			return g.withAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				res, err := seekGroup(ctx, g, adm, group, target, topics, o.dryRun)
				if err != nil {
					return err
				}
				return printSeekResult(cmd.OutOrStdout(), g.format, res)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.to, "to", "", "start, end, OFFSET, or @TIMESTAMP_MS (Unix milliseconds)")
	f.StringSliceVar(&o.topics, "topics", nil, "only these topics (comma-separated; default: every topic the group has offsets for)")
	f.BoolVar(&o.dryRun, "dry-run", false, "show the new offsets without committing them")
	return cmd
}

// checkSeekable refuses groups with members. An offset commit without a
// member and generation is only accepted for an Empty group, and moving
// offsets under a running consumer would be overwritten by its next commit.
// A group that does not exist (Dead, GROUP_ID_NOT_FOUND) is fine: the commit
// creates it.
func checkSeekable(group string, d kadm.DescribedGroup) error {
	if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return fmt.Errorf("describe group %s: %s", group, statusCell(d.Err, d.ErrMessage))
	}
	if d.Err != nil {
		return nil
	}
	if len(d.Members) > 0 || (d.State != "Empty" && d.State != "Dead") {
		return fmt.Errorf("group %s has %d active members (state %s): stop its consumers before seeking", group, len(d.Members), d.State)
	}
	return nil
}

func seekGroup(ctx context.Context, g *globalOptions, adm *kadm.Client, group string, target seekTarget, topics []string, dry bool) (*seekResult, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, g.describeCallErr("describe group "+group, err)
	}
	d, ok := described[group]
	if !ok {
		return nil, fmt.Errorf("describe group %s: broker did not describe it", group)
	}
	if err := checkSeekable(group, d); err != nil {
		return nil, err
	}

	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, g.describeCallErr("fetch committed offsets of "+group, err)
	}

	set := make(kadm.TopicsSet)
	if len(topics) > 0 {
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return nil, g.describeCallErr("loading metadata", err)
		}
		for _, t := range topics {
			td, ok := details[t]
			if !ok {
				return nil, fmt.Errorf("topic %s: broker returned no metadata for it", t)
			}
			if td.Err != nil {
				return nil, fmt.Errorf("topic %s: %s", t, statusCell(td.Err, ""))
			}
			set.Add(t, td.Partitions.Numbers()...)
		}
	} else {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil || o.At >= 0 {
				set.Add(o.Topic, o.Partition)
			}
		})
		if len(set) == 0 {
			return nil, fmt.Errorf("group %s has no committed offsets: name the topics to seek with --topics", group)
		}
	}

	names := set.Topics()
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, g.describeCallErr("list log start offsets", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, g.describeCallErr("list log end offsets", err)
	}
	var byTime kadm.ListedOffsets
	if target.kind == seekTimestamp {
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, target.value, names...); err != nil {
			return nil, g.describeCallErr("list offsets by timestamp", err)
		}
	}

	res := &seekResult{Group: group, Target: target.String(), DryRun: dry}
	res.Partitions = planSeek(set, committed, target, starts, ends, byTime)
	if dry {
		return res, nil
	}

	toCommit := make(kadm.Offsets)
	for _, r := range res.Partitions {
		if r.Error == "" {
			toCommit.AddOffset(r.Topic, r.Partition, r.After, -1)
		}
	}
	if len(toCommit) == 0 {
		return res, nil
	}
	resps, err := adm.CommitOffsets(ctx, group, toCommit)
	if err != nil {
		return nil, g.describeCallErr("commit offsets", err)
	}
	for i := range res.Partitions {
		r := &res.Partitions[i]
		if r.Error != "" {
			continue
		}
		c, ok := resps.Lookup(r.Topic, r.Partition)
		switch {
		case !ok:
			r.Error = "MISSING_RESPONSE"
			r.ErrorMessage = "broker did not answer for this partition"
		case c.Err != nil:
			r.Error = kafkaErrName(c.Err)
			r.ErrorMessage = kafkaErrDetail(c.Err, "")
		}
	}
	return res, nil
}

// planSeek computes the new offset of every partition in set. It is pure so
// the rules (clamping, missing offsets, per-partition errors) are testable
// without a broker.
func planSeek(set kadm.TopicsSet, committed kadm.OffsetResponses, target seekTarget, starts, ends, byTime kadm.ListedOffsets) []seekRow {
	rows := []seekRow{}
	for _, tp := range set.Sorted() {
		for _, p := range tp.Partitions {
			r := seekRow{Topic: tp.Topic, Partition: p, Before: -1, After: -1}
			setErr := func(what string, err error) {
				r.Error = kafkaErrName(err)
				r.ErrorMessage = what + ": " + kafkaErrDetail(err, "")
			}
			if c, ok := committed.Lookup(tp.Topic, p); ok {
				if c.Err != nil {
					setErr("committed offset", c.Err)
					rows = append(rows, r)
					continue
				}
				if c.At >= 0 {
					r.Before = c.At
				}
			}
			start, startErr := listedOffset(starts, tp.Topic, p)
			end, endErr := listedOffset(ends, tp.Topic, p)
			switch {
			case startErr != nil:
				setErr("log start offset", startErr)
			case endErr != nil:
				setErr("log end offset", endErr)
			default:
				switch target.kind {
				case seekStart:
					r.After = start
				case seekEnd:
					r.After = end
				case seekOffset:
					r.After = target.value
					if r.After < start {
						r.After = start
						r.Note = "clamped to log start offset"
					} else if r.After > end {
						r.After = end
						r.Note = "clamped to log end offset"
					}
				case seekTimestamp:
					at, err := listedOffset(byTime, tp.Topic, p)
					switch {
					case err != nil:
						setErr("offset for timestamp", err)
					case at < 0:
						r.After = end
						r.Note = "no record at or after the timestamp: log end offset"
					default:
						r.After = at
					}
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

var errListMissing = errors.New("partition missing from the ListOffsets response")

func listedOffset(l kadm.ListedOffsets, topic string, p int32) (int64, error) {
	o, ok := l.Lookup(topic, p)
	if !ok {
		if t, ok := l.Lookup(topic, -1); ok && t.Err != nil {
			return -1, t.Err // kadm's marker for a topic that failed to load
		}
		return -1, errListMissing
	}
	if o.Err != nil {
		return -1, o.Err
	}
	return o.Offset, nil
}

func printSeekResult(w io.Writer, format string, res *seekResult) error {
	failed := 0
	for _, r := range res.Partitions {
		if r.Error != "" {
			failed++
		}
	}
	var err error
	if format == formatJSON {
		err = writeJSON(w, res)
	} else {
		t := newTable("TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET", "STATUS")
		for _, r := range res.Partitions {
			status := "OK"
			switch {
			case r.Error != "":
				status = joinErr(r.Error, r.ErrorMessage)
			case res.DryRun:
				status = "OK (dry run, not committed)"
			}
			if r.Error == "" && r.Note != "" {
				status += " (" + r.Note + ")"
			}
			t.row(r.Topic, r.Partition, offsetCell(r.Before), offsetCell(r.After), status)
		}
		err = t.write(w)
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partitions failed", failed, len(res.Partitions))
	}
	return nil
}
