package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl transaction list|describe: the transactional ids the cluster's
// coordinators hold (ListTransactions, DescribeTransactions), as
// kafka-transactions shows them.

func newTransactionCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "transaction",
		Aliases: []string{"transactions", "txn"},
		Short:   "List and describe transactional ids",
	}
	cmd.AddCommand(newTransactionListCommand(g), newTransactionDescribeCommand(g))
	return cmd
}

// transactionSummary is one line of `transaction list`.
type transactionSummary struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	State           string `json:"state"`
	CoordinatorID   int32  `json:"coordinator_id"`
}

func newTransactionListCommand(g *cli.Options) *cobra.Command {
	var states []string
	var pattern string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List transactional ids",
		Long: "List every transactional id the coordinators hold, with its producer id\n" +
			"and state (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,\n" +
			"CompleteAbort). --state and --pattern (a regular expression) filter.",
		Example: "  weirctl transaction list --state Ongoing",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				listed, err := adm.ListTransactionsByTxPattern(ctx, nil, states, pattern)
				if err != nil && len(listed) == 0 {
					return g.DescribeCallErr("list transactions", err)
				}
				out := []transactionSummary{}
				for _, l := range listed.Sorted() {
					out = append(out, transactionSummary{l.TxnID, l.ProducerID, l.State, l.Coordinator})
				}
				if werr := printTransactionList(cmd.OutOrStdout(), g.Format, out); werr != nil {
					return werr
				}
				if err != nil {
					return g.DescribeCallErr("list transactions (partial answer)", err)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only transactions in these states (comma-separated, repeatable)")
	cmd.Flags().StringVar(&pattern, "pattern", "", "only transactional ids matching this regular expression")
	return cmd
}

func printTransactionList(w io.Writer, format string, txns []transactionSummary) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, txns)
	}
	t := cli.NewTable("TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR")
	for _, s := range txns {
		t.Row(s.TransactionalID, s.ProducerID, s.State, s.CoordinatorID)
	}
	return t.Write(w)
}

// transactionDetail is `transaction describe`'s answer for one id.
type transactionDetail struct {
	TransactionalID string             `json:"transactional_id"`
	State           string             `json:"state"`
	ProducerID      int64              `json:"producer_id"`
	ProducerEpoch   int16              `json:"producer_epoch"`
	TimeoutMs       int32              `json:"timeout_ms"`
	Started         string             `json:"started,omitempty"` // RFC 3339, open transactions only
	CoordinatorID   int32              `json:"coordinator_id"`
	Partitions      map[string][]int32 `json:"partitions"`
	Error           string             `json:"error,omitempty"`
}

func newTransactionDescribeCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:     "describe TRANSACTIONAL-ID...",
		Short:   "Describe transactional ids",
		Long:    "Show each transactional id's producer id and epoch, state, timeout, the\nstart of its open transaction and the partitions in it.",
		Example: "  weirctl transaction describe orders-app",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				described, err := adm.DescribeTransactions(ctx, dedupe(ids)...)
				if err != nil && len(described) == 0 {
					return g.DescribeCallErr("describe transactions", err)
				}
				var out []transactionDetail
				var failed []string
				for _, id := range dedupe(ids) {
					d, ok := described[id]
					td := transactionDetail{TransactionalID: id, Partitions: map[string][]int32{}}
					switch {
					case !ok:
						td.Error = "MISSING_RESPONSE"
					case d.Err != nil:
						td.Error = cli.KafkaErrName(d.Err)
					default:
						td.State, td.ProducerID, td.ProducerEpoch, td.TimeoutMs, td.CoordinatorID = d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis, d.Coordinator
						if d.StartTimestamp >= 0 {
							td.Started = time.UnixMilli(d.StartTimestamp).UTC().Format(time.RFC3339Nano)
						}
						for topic, ps := range d.Topics {
							for p := range ps {
								td.Partitions[topic] = append(td.Partitions[topic], p)
							}
							sort.Slice(td.Partitions[topic], func(i, j int) bool { return td.Partitions[topic][i] < td.Partitions[topic][j] })
						}
					}
					if td.Error != "" {
						failed = append(failed, id+": "+td.Error)
					}
					out = append(out, td)
				}
				if werr := printTransactionDetails(cmd.OutOrStdout(), g.Format, out); werr != nil {
					return werr
				}
				if len(failed) > 0 {
					return fmt.Errorf("could not describe %d transactional ids: %s", len(failed), strings.Join(failed, ", "))
				}
				return nil
			})
		},
	}
}

func printTransactionDetails(w io.Writer, format string, txns []transactionDetail) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, txns)
	}
	t := cli.NewTable("TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "STARTED", "PARTITIONS")
	for _, d := range txns {
		if d.Error != "" {
			t.Row(d.TransactionalID, d.Error, "-", "-", "-", "-", "-")
			continue
		}
		var parts []string
		topics := make([]string, 0, len(d.Partitions))
		for topic := range d.Partitions {
			topics = append(topics, topic)
		}
		sort.Strings(topics)
		for _, topic := range topics {
			for _, p := range d.Partitions[topic] {
				parts = append(parts, fmt.Sprintf("%s/%d", topic, p))
			}
		}
		started := d.Started
		if started == "" {
			started = "-"
		}
		t.Row(d.TransactionalID, d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMs, started, strings.Join(parts, ","))
	}
	return t.Write(w)
}
