package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func newClusterCoalescerCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "coalescer",
		Short: "Inspect the fetch read coalescer (kafka_fetch_read_coalescing_enabled) on every broker",
		Long: "The coalescer commands ask one broker's admin API for the brokers of the\n" +
			"cluster (GET /v1/brokers), then read each live broker's /metrics at its\n" +
			"admin_addr. " + admin.URLHelp,
	}
	client := admin.AddURLFlag(cmd, g)
	cmd.AddCommand(newCoalescerStatsCommand(g, client))
	return cmd
}

// errNoBrokerAnswered makes `cluster coalescer stats` exit non-zero when
// no broker's counters could be read; some failing is reported, not fatal.
var errNoBrokerAnswered = errors.New("no broker reported coalescer counters")

func newCoalescerStatsCommand(g *cli.Options, client func() *admin.Client) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Show each broker's coalescer counters per shard, with hit ratios",
		Long: "For every live broker and shard: reads that inserted a cache entry\n" +
			"(insertions, and reinsertions of an evicted key) and reads served from one\n" +
			"that was ready or still being read (hits). HIT-RATIO is hits over all\n" +
			"coalesced reads. SHARED-BYTES are the record bytes hits took from other\n" +
			"fetches' reads; US/READ is the time a miss's log read took on average,\n" +
			"which is what each hit saved, and SAVED-S the hits times that: the broker\n" +
			"time coalescing saved, before its own cost (compare broker CPU with\n" +
			"coalescing off and on: weirctl bench fanout). Counters are totals since\n" +
			"each broker started.\n" +
			"Brokers that cannot be read are listed with the reason; the command fails\n" +
			"only when none can be read.",
		Example: "  weirctl cluster coalescer stats --admin-url 127.0.0.1:9644\n" +
			"  weirctl cluster coalescer stats --format json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := client()
			brokers, err := c.ListBrokers(cmd.Context())
			if err != nil {
				return err
			}
			stats := summarizeCoalescer(c.ScrapeBrokers(cmd.Context(), brokers))
			if err := stats.write(cmd.OutOrStdout(), g.Format); err != nil {
				return err
			}
			if stats.Answered == 0 {
				return errNoBrokerAnswered
			}
			return nil
		},
	}
}

// coalescerStats is the document `cluster coalescer stats` prints; field
// names are a contract for scripts.
type coalescerStats struct {
	Brokers []coalescerBrokerStats `json:"brokers"`
	// Answered counts brokers whose counters were read; Total sums them.
	Answered int                   `json:"answered"`
	Total    admin.CoalescerCounts `json:"total"`
}

type coalescerBrokerStats struct {
	NodeID    int32                        `json:"node_id"`
	AdminAddr string                       `json:"admin_addr"`
	Shards    []admin.ShardCoalescerCounts `json:"shards"`
	Total     *admin.CoalescerCounts       `json:"total,omitempty"`
	Error     string                       `json:"error,omitempty"`
}

func summarizeCoalescer(scrapes []admin.BrokerScrape) coalescerStats {
	s := coalescerStats{Brokers: []coalescerBrokerStats{}}
	for _, sc := range scrapes {
		b := coalescerBrokerStats{NodeID: sc.Broker.NodeID, AdminAddr: sc.Broker.AdminAddr, Shards: []admin.ShardCoalescerCounts{}}
		err := sc.Err
		if err == nil {
			var shards []admin.ShardCoalescerCounts
			if shards, err = sc.Metrics.CoalescerShards(); err == nil {
				total := admin.SumShards(shards)
				b.Shards, b.Total = shards, &total
				s.Total = s.Total.Plus(total)
				s.Answered++
			}
		}
		if err != nil {
			b.Error = err.Error()
		}
		s.Brokers = append(s.Brokers, b)
	}
	return s
}

func (s coalescerStats) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, s)
	}
	t := cli.NewTable("BROKER", "SHARD", "INSERTIONS", "REINSERTIONS", "READY-HITS", "INFLIGHT-HITS", "HIT-RATIO",
		"SHARED-BYTES", "US/READ", "SAVED-S")
	countsRow := func(broker, shard string, c admin.CoalescerCounts) {
		t.Row(broker, shard, c.Insertions, c.Reinsertions, c.ReadyHits, c.InflightHits, fmt.Sprintf("%.3f", c.HitRatio),
			c.SharedBytes, fmt.Sprintf("%.1f", c.SecondsPerRead*1e6), fmt.Sprintf("%.3f", c.SavedSeconds))
	}
	var failed []coalescerBrokerStats
	for _, b := range s.Brokers {
		if b.Total == nil {
			failed = append(failed, b)
			continue
		}
		id := fmt.Sprint(b.NodeID)
		for _, sh := range b.Shards {
			countsRow(id, sh.Shard, sh.CoalescerCounts)
		}
		countsRow(id, "total", *b.Total)
	}
	// A cluster line only adds information when it sums several brokers.
	if s.Answered > 1 {
		countsRow("all", "total", s.Total)
	}
	if s.Answered > 0 {
		if err := t.Write(w); err != nil {
			return err
		}
	}
	if len(failed) == 0 {
		return nil
	}
	if s.Answered > 0 {
		fmt.Fprintln(w)
	}
	ft := cli.NewTable("BROKER", "ADMIN-ADDR", "ERROR")
	for _, b := range failed {
		ft.Row(b.NodeID, b.AdminAddr, b.Error)
	}
	return ft.Write(w)
}
