package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl cluster partitions: move replicas between brokers through
// Kafka's partition reassignment API (KIP-455), as kafka-reassign-partitions
// does, with the plans an operator usually wants computed for them.

func newClusterPartitionsCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "partitions",
		Short: "Move partition replicas: move one, decommission a broker, balance the cluster",
	}
	cmd.AddCommand(newPartitionsMoveCommand(g), newPartitionsDecommissionCommand(g), newPartitionsBalanceCommand(g), newPartitionsStatusCommand(g))
	return cmd
}

type partitionsOptions struct {
	wait        bool
	waitTimeout time.Duration
	dryRun      bool
}

func (o *partitionsOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.wait, "wait", false, "wait for the moves to complete, showing progress")
	f.DurationVar(&o.waitTimeout, "wait-timeout", 30*time.Minute, "how long --wait waits")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the moves without starting them")
}

func newPartitionsMoveCommand(g *cli.Options) *cobra.Command {
	o := &partitionsOptions{}
	var to string
	cmd := &cobra.Command{
		Use:     "move TOPIC/PARTITION --to BROKERS",
		Short:   "Move one partition to the brokers listed (the first its preferred leader)",
		Example: "  weirctl cluster partitions move orders/3 --to 1,2,4 --wait",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic, partition, err := parseTopicPartition(args[0])
			if err != nil {
				return err
			}
			target, err := parseBrokerList(to)
			if err != nil {
				return err
			}
			return runMoves(cmd, g, o, func(_ []planBroker, parts []planPartition) ([]move, error) {
				for _, p := range parts {
					if p.Topic == topic && p.Partition == partition {
						return []move{{Topic: topic, Partition: partition, From: p.Replicas, To: target}}, nil
					}
				}
				return nil, fmt.Errorf("no partition %s/%d", topic, partition)
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "comma-separated broker ids")
	_ = cmd.MarkFlagRequired("to")
	o.flags(cmd)
	return cmd
}

func newPartitionsDecommissionCommand(g *cli.Options) *cobra.Command {
	o := &partitionsOptions{}
	cmd := &cobra.Command{
		Use:   "decommission NODE",
		Short: "Move every replica off a broker",
		Long: "Move every replica on NODE to another live broker: one in NODE's rack when\n" +
			"possible, else the least loaded. With --wait, shows progress until NODE holds\n" +
			"nothing; it can then be stopped for good.",
		Example: "  weirctl cluster partitions decommission 3 --wait",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil {
				return fmt.Errorf("NODE must be a broker id: %w", err)
			}
			return runMoves(cmd, g, o, func(brokers []planBroker, parts []planPartition) ([]move, error) {
				return planDecommission(brokers, parts, int32(node))
			})
		},
	}
	o.flags(cmd)
	return cmd
}

func newPartitionsBalanceCommand(g *cli.Options) *cobra.Command {
	o := &partitionsOptions{}
	cmd := &cobra.Command{
		Use:   "balance",
		Short: "Spread replicas evenly over the live brokers, then leaders",
		Long: "Move replicas from the most to the least loaded live brokers until no two\n" +
			"differ by more than one (a broker added later gets its share), preferring a\n" +
			"target in the same rack; with --wait, then elect every partition's preferred\n" +
			"leader, which spreads leadership as placement spread the first replicas.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMoves(cmd, g, o, func(brokers []planBroker, parts []planPartition) ([]move, error) {
				return planBalance(brokers, parts), nil
			})
		},
	}
	o.flags(cmd)
	return cmd
}

func newPartitionsStatusCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List the reassignments in progress",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				_, parts, err := clusterPlanInput(ctx, adm)
				if err != nil {
					return err
				}
				running, err := listReassignments(ctx, adm, parts)
				if err != nil {
					return err
				}
				rows := make([]reassignmentRow, 0, len(running))
				for _, r := range running {
					rows = append(rows, reassignmentRow{Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas, Adding: r.AddingReplicas, Removing: r.RemovingReplicas})
				}
				sort.Slice(rows, func(i, j int) bool {
					return rows[i].Topic < rows[j].Topic || rows[i].Topic == rows[j].Topic && rows[i].Partition < rows[j].Partition
				})
				if g.Format != cli.FormatTable {
					return cli.WriteDocument(cmd.OutOrStdout(), g.Format, rows)
				}
				w := cmd.OutOrStdout()
				if len(rows) == 0 {
					_, err := fmt.Fprintln(w, "no reassignments in progress")
					return err
				}
				fmt.Fprintf(w, "%-30s %-9s %-16s %-10s %s\n", "TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING")
				for _, r := range rows {
					fmt.Fprintf(w, "%-30s %-9d %-16s %-10s %s\n", r.Topic, r.Partition, brokerList(r.Replicas), brokerList(r.Adding), brokerList(r.Removing))
				}
				return nil
			})
		},
	}
}

type reassignmentRow struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding"`
	Removing  []int32 `json:"removing"`
}

// movesResult is what move, decommission and balance report.
type movesResult struct {
	Moves     []move   `json:"moves"`
	Started   bool     `json:"started"`
	Completed bool     `json:"completed"`
	Errors    []string `json:"errors,omitempty"`
}

// runMoves plans moves from the cluster's metadata, starts them (unless
// --dry-run) and, with --wait, follows them to completion.
func runMoves(cmd *cobra.Command, g *cli.Options, o *partitionsOptions, plan func([]planBroker, []planPartition) ([]move, error)) error {
	// The command's own deadline covers --wait; each call gets --timeout.
	deadline := g.Timeout
	if o.wait {
		deadline += o.waitTimeout
	}
	cl, err := g.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(g.Timeout.Milliseconds()))
	ctx, cancel := context.WithTimeout(cmd.Context(), deadline)
	defer cancel()

	brokers, parts, err := clusterPlanInput(ctx, adm)
	if err != nil {
		return err
	}
	moves, err := plan(brokers, parts)
	if err != nil {
		return err
	}
	res := movesResult{Moves: moves}
	if res.Moves == nil {
		res.Moves = []move{}
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if g.Format == cli.FormatTable {
		printMoves(out, moves, o.dryRun)
	}
	if o.dryRun || len(moves) == 0 {
		return finishMoves(out, g, res)
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, m := range moves {
		req.Assign(m.Topic, m.Partition, m.To)
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return g.DescribeCallErr("starting the reassignments", err)
	}
	resps.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if r.Err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("%s/%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage))
		}
	})
	res.Started = true
	if !o.wait || len(res.Errors) > 0 {
		return finishMoves(out, g, res)
	}
	if err := waitMoves(ctx, adm, moves, errOut); err != nil {
		return err
	}
	res.Completed = true
	if cmd.Name() == "balance" {
		if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("electing preferred leaders: %v", err))
		}
	}
	return finishMoves(out, g, res)
}

func finishMoves(w io.Writer, g *cli.Options, res movesResult) error {
	if g.Format != cli.FormatTable {
		if err := cli.WriteDocument(w, g.Format, res); err != nil {
			return err
		}
	} else {
		for _, e := range res.Errors {
			fmt.Fprintln(w, "error:", e)
		}
		switch {
		case res.Completed:
			fmt.Fprintf(w, "%d partition(s) moved\n", len(res.Moves))
		case res.Started && len(res.Errors) == 0:
			fmt.Fprintf(w, "%d reassignment(s) started; follow them with: weirctl cluster partitions status\n", len(res.Moves))
		}
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("%d of %d reassignment(s) failed", len(res.Errors), len(res.Moves))
	}
	return nil
}

func printMoves(w io.Writer, moves []move, dryRun bool) {
	if len(moves) == 0 {
		fmt.Fprintln(w, "nothing to move")
		return
	}
	verb := "moving"
	if dryRun {
		verb = "would move"
	}
	for _, m := range moves {
		fmt.Fprintf(w, "%s %s/%d: %s → %s\n", verb, m.Topic, m.Partition, brokerList(m.From), brokerList(m.To))
	}
}

// waitMoves polls the reassignments until none of moves is in progress
// and each partition's replicas are its target, drawing a progress bar on
// w once a second.
func waitMoves(ctx context.Context, adm *kadm.Client, moves []move, w io.Writer) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	shown := -1
	for {
		_, parts, err := clusterPlanInput(ctx, adm)
		if err != nil {
			return err
		}
		running, err := listReassignments(ctx, adm, parts)
		if err != nil {
			return err
		}
		replicas := map[string][]int32{}
		for _, p := range parts {
			replicas[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p.Replicas
		}
		done := 0
		for _, m := range moves {
			key := fmt.Sprintf("%s/%d", m.Topic, m.Partition)
			if _, busy := running[key]; !busy && slices.Equal(replicas[key], m.To) {
				done++
			}
		}
		if done != shown {
			// A new line only when the count moves, so a log of the
			// output stays short; a terminal sees the bar redrawn.
			fmt.Fprintf(w, "\r[%s] %d/%d partitions moved", progressBar(done, len(moves), 30), done, len(moves))
			shown = done
		}
		if done == len(moves) {
			fmt.Fprintln(w)
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return fmt.Errorf("waiting for the moves: %d of %d done: %w", done, len(moves), ctx.Err())
		case <-t.C:
		}
	}
}

func progressBar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = done * width / total
	}
	return strings.Repeat("#", n) + strings.Repeat("-", width-n)
}

// clusterPlanInput reads the live brokers and every partition's replicas.
func clusterPlanInput(ctx context.Context, adm *kadm.Client) ([]planBroker, []planPartition, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading metadata: %w", err)
	}
	var brokers []planBroker
	for _, b := range md.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		brokers = append(brokers, planBroker{ID: b.NodeID, Rack: rack})
	}
	var parts []planPartition
	for _, td := range md.Topics.Sorted() {
		if td.Err != nil {
			continue
		}
		for _, pd := range td.Partitions.Sorted() {
			parts = append(parts, planPartition{Topic: td.Topic, Partition: pd.Partition, Replicas: slices.Clone(pd.Replicas)})
		}
	}
	return brokers, parts, nil
}

// listReassignments asks about every partition, by "topic/partition".
func listReassignments(ctx context.Context, adm *kadm.Client, parts []planPartition) (map[string]kadm.ListPartitionReassignmentsResponse, error) {
	set := kadm.TopicsSet{}
	for _, p := range parts {
		set.Add(p.Topic, p.Partition)
	}
	resps, err := adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("listing reassignments: %w", err)
	}
	out := map[string]kadm.ListPartitionReassignmentsResponse{}
	for _, ps := range resps {
		for _, r := range ps {
			out[fmt.Sprintf("%s/%d", r.Topic, r.Partition)] = r
		}
	}
	return out, nil
}

func parseTopicPartition(s string) (string, int32, error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return "", 0, fmt.Errorf("%q: want TOPIC/PARTITION", s)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || p < 0 {
		return "", 0, fmt.Errorf("%q: the partition must be a number", s)
	}
	return s[:i], int32(p), nil
}

func parseBrokerList(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--to %q: broker ids are numbers", s)
		}
		if slices.Contains(out, int32(n)) {
			return nil, fmt.Errorf("--to %q: broker %d listed twice", s, n)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func brokerList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(s, ",") + "]"
}
