package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// weirctl producer describe TOPIC: the idempotent and transactional
// producers each partition's leader remembers (DescribeProducers), as
// kafka-transactions describe-producers shows them.

func newProducerCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "producer",
		Aliases: []string{"producers"},
		Short:   "Describe the producers of a topic's partitions",
	}
	cmd.AddCommand(newProducerDescribeCommand(g))
	return cmd
}

// producerLine is one producer of one partition.
type producerLine struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	LastSequence  int32  `json:"last_sequence"`
	LastTimestamp string `json:"last_timestamp,omitempty"`
	// TxnStartOffset is the first offset of its open transaction, -1
	// for none.
	TxnStartOffset int64 `json:"txn_start_offset"`
}

func newProducerDescribeCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:     "describe TOPIC",
		Short:   "Describe the producers of a topic's partitions",
		Long:    "Show, for each partition of TOPIC, the producers its leader remembers:\nid, epoch, last sequence, last write, and where an open transaction began.",
		Example: "  weirctl producer describe orders",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
				described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{args[0]: nil})
				if err != nil && len(described) == 0 {
					return g.DescribeCallErr("describe producers", err)
				}
				lines := []producerLine{}
				var failed []string
				for _, p := range described.SortedPartitions() {
					if p.Err != nil {
						failed = append(failed, fmt.Sprintf("%s/%d: %s", p.Topic, p.Partition, cli.KafkaErrName(p.Err)))
						continue
					}
					for _, pr := range p.ActiveProducers.Sorted() {
						l := producerLine{Topic: pr.Topic, Partition: pr.Partition, ProducerID: pr.ProducerID, ProducerEpoch: pr.ProducerEpoch,
							LastSequence: pr.LastSequence, TxnStartOffset: pr.CurrentTxnStartOffset}
						if pr.LastTimestamp >= 0 {
							l.LastTimestamp = time.UnixMilli(pr.LastTimestamp).UTC().Format(time.RFC3339Nano)
						}
						lines = append(lines, l)
					}
				}
				if werr := printProducers(cmd.OutOrStdout(), g.Format, lines); werr != nil {
					return werr
				}
				if len(failed) > 0 {
					return fmt.Errorf("could not describe %d partitions: %s", len(failed), strings.Join(failed, ", "))
				}
				return nil
			})
		},
	}
}

func printProducers(w io.Writer, format string, lines []producerLine) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, lines)
	}
	t := cli.NewTable("TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "TXN-START-OFFSET")
	for _, l := range lines {
		last := l.LastTimestamp
		if last == "" {
			last = "-"
		}
		txn := "-"
		if l.TxnStartOffset >= 0 {
			txn = fmt.Sprint(l.TxnStartOffset)
		}
		t.Row(l.Topic, l.Partition, l.ProducerID, l.ProducerEpoch, l.LastSequence, last, txn)
	}
	return t.Write(w)
}
