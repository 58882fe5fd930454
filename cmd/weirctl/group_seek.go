package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl group seek: move a memberless group's committed offsets to the log
// start, the log end, an exact offset or a timestamp.

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

func newGroupSeekCommand(g *cli.Options) *cobra.Command {
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
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				res, err := seekGroup(ctx, g, adm, group, target, topics, o.dryRun)
				if err != nil {
					return err
				}
				return printSeekResult(cmd.OutOrStdout(), g.Format, res)
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
		return fmt.Errorf("describe group %s: %s", group, cli.StatusCell(d.Err, d.ErrMessage))
	}
	if d.Err != nil {
		return nil
	}
	if len(d.Members) > 0 || (d.State != "Empty" && d.State != "Dead") {
		return fmt.Errorf("group %s has %d active members (state %s): stop its consumers before seeking", group, len(d.Members), d.State)
	}
	return nil
}

// checkConsumerSeekable is checkSeekable for what ConsumerGroupDescribe
// said: whether the group is a consumer-protocol group (else DescribeGroups
// decides), and if so whether it is free of members.
func checkConsumerSeekable(group string, cg kadm.DescribedConsumerGroup, found bool) (consumer bool, err error) {
	if !found || notConsumerGroup(cg.Err) {
		return false, nil
	}
	if cg.Err != nil {
		return true, fmt.Errorf("describe group %s: %s", group, cli.StatusCell(cg.Err, ""))
	}
	if len(cg.Members) > 0 {
		return true, fmt.Errorf("group %s has %d active members (state %s): stop its consumers before seeking", group, len(cg.Members), cg.State)
	}
	return true, nil
}

func seekGroup(ctx context.Context, g *cli.Options, adm *kadm.Client, group string, target seekTarget, topics []string, dry bool) (*seekResult, error) {
	// A consumer-protocol group is not one DescribeGroups knows (it
	// answers GROUP_ID_NOT_FOUND, which would pass as "no members"): ask
	// ConsumerGroupDescribe first. A failure to ask (a broker without the
	// API) leaves the decision to DescribeGroups.
	cgs, _ := adm.DescribeConsumerGroups(ctx, group)
	cg, found := cgs[group]
	consumer, err := checkConsumerSeekable(group, cg, found)
	if err != nil {
		return nil, err
	}
	if !consumer {
		described, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return nil, g.DescribeCallErr("describe group "+group, err)
		}
		d, ok := described[group]
		if !ok {
			return nil, fmt.Errorf("describe group %s: broker did not describe it", group)
		}
		if err := checkSeekable(group, d); err != nil {
			return nil, err
		}
	}

	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, g.DescribeCallErr("fetch committed offsets of "+group, err)
	}

	set := make(kadm.TopicsSet)
	if len(topics) > 0 {
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return nil, g.DescribeCallErr("loading metadata", err)
		}
		for _, t := range topics {
			td, ok := details[t]
			if !ok {
				return nil, fmt.Errorf("topic %s: broker returned no metadata for it", t)
			}
			if td.Err != nil {
				return nil, fmt.Errorf("topic %s: %s", t, cli.StatusCell(td.Err, ""))
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
		return nil, g.DescribeCallErr("list log start offsets", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, g.DescribeCallErr("list log end offsets", err)
	}
	var byTime kadm.ListedOffsets
	if target.kind == seekTimestamp {
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, target.value, names...); err != nil {
			return nil, g.DescribeCallErr("list offsets by timestamp", err)
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
		return nil, g.DescribeCallErr("commit offsets", err)
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
			r.Error = cli.KafkaErrName(c.Err)
			r.ErrorMessage = cli.KafkaErrDetail(c.Err, "")
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
				r.Error = cli.KafkaErrName(err)
				r.ErrorMessage = what + ": " + cli.KafkaErrDetail(err, "")
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
	if format != cli.FormatTable {
		err = cli.WriteDocument(w, format, res)
	} else {
		t := cli.NewTable("TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET", "STATUS")
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
			t.Row(r.Topic, r.Partition, offsetCell(r.Before), offsetCell(r.After), status)
		}
		err = t.Write(w)
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d partitions failed", failed, len(res.Partitions))
	}
	return nil
}
