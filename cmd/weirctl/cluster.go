package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func newClusterCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect the cluster: brokers, controller, partition health",
	}
	cmd.AddCommand(newClusterInfoCommand(g), newClusterHealthCommand(g), newClusterConfigCommand(g), newClusterLicenseCommand(g), newClusterCoalescerCommand(g),
		newClusterPartitionsCommand(g))
	return cmd
}

// brokerSummary is one broker as cluster info shows it.
type brokerSummary struct {
	ID       int32  `json:"id"`
	Host     string `json:"host"`
	Port     int32  `json:"port"`
	Rack     string `json:"rack,omitempty"`
	Leaders  int    `json:"leaders"`
	Replicas int    `json:"replicas"`
}

// clusterSummary is what info and health report, derived from one
// Metadata response (internal topics included).
type clusterSummary struct {
	ClusterID       string          `json:"cluster_id"`
	Controller      int32           `json:"controller"`
	Brokers         []brokerSummary `json:"brokers"`
	Topics          int             `json:"topics"`
	Partitions      int             `json:"partitions"`
	Leaderless      []string        `json:"leaderless_partitions"`
	UnderReplicated []string        `json:"under_replicated_partitions"`
	DownNodes       []int32         `json:"down_nodes"`
	Healthy         bool            `json:"healthy"`
	Problems        []string        `json:"problems,omitempty"`
}

// summarizeCluster counts leaders and replicas per broker and finds what
// is unhealthy: partitions without a leader, partitions whose in-sync set
// is smaller than their replica set, and replicas on nodes that are not
// among the live brokers (Metadata lists only live ones).
func summarizeCluster(m kadm.Metadata) clusterSummary {
	s := clusterSummary{ClusterID: m.Cluster, Controller: m.Controller, Leaderless: []string{}, UnderReplicated: []string{}, DownNodes: []int32{}}
	byID := map[int32]*brokerSummary{}
	for _, b := range m.Brokers {
		bs := brokerSummary{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bs.Rack = *b.Rack
		}
		s.Brokers = append(s.Brokers, bs)
	}
	sort.Slice(s.Brokers, func(i, j int) bool { return s.Brokers[i].ID < s.Brokers[j].ID })
	for i := range s.Brokers {
		byID[s.Brokers[i].ID] = &s.Brokers[i]
	}
	down := map[int32]bool{}
	for _, t := range m.Topics.Sorted() {
		if t.Err != nil {
			s.Problems = append(s.Problems, fmt.Sprintf("topic %s: %s", t.Topic, cli.KafkaErrName(t.Err)))
			continue
		}
		s.Topics++
		for _, p := range t.Partitions.Sorted() {
			s.Partitions++
			name := fmt.Sprintf("%s/%d", t.Topic, p.Partition)
			if b := byID[p.Leader]; b != nil {
				b.Leaders++
			} else {
				s.Leaderless = append(s.Leaderless, name)
			}
			if len(p.ISR) < len(p.Replicas) {
				s.UnderReplicated = append(s.UnderReplicated, name)
			}
			for _, r := range p.Replicas {
				if b := byID[r]; b != nil {
					b.Replicas++
				} else {
					down[r] = true
				}
			}
		}
	}
	for id := range down {
		s.DownNodes = append(s.DownNodes, id)
	}
	sort.Slice(s.DownNodes, func(i, j int) bool { return s.DownNodes[i] < s.DownNodes[j] })
	if s.Controller < 0 {
		s.Problems = append(s.Problems, "no controller")
	}
	if len(s.DownNodes) > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("nodes down: %v", s.DownNodes))
	}
	if n := len(s.Leaderless); n > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%d leaderless partitions", n))
	}
	if n := len(s.UnderReplicated); n > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%d under-replicated partitions", n))
	}
	s.Healthy = len(s.Problems) == 0
	return s
}

func loadClusterSummary(cmd *cobra.Command, g *cli.Options) (clusterSummary, error) {
	var s clusterSummary
	err := g.WithAdmin(cmd.Context(), func(ctx context.Context, adm *kadm.Client) error {
		m, err := adm.Metadata(ctx)
		if err != nil {
			return g.DescribeCallErr("metadata", err)
		}
		s = summarizeCluster(m)
		return nil
	})
	return s, err
}

func newClusterInfoCommand(g *cli.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show the cluster id, controller, brokers (with racks) and partition counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := loadClusterSummary(cmd, g)
			if err != nil {
				return err
			}
			return printClusterInfo(cmd.OutOrStdout(), g.Format, s)
		},
	}
}

func printClusterInfo(w io.Writer, format string, s clusterSummary) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, s)
	}
	fmt.Fprintf(w, "CLUSTER     %s\nCONTROLLER  %d\nTOPICS      %d\nPARTITIONS  %d\n\n", s.ClusterID, s.Controller, s.Topics, s.Partitions)
	t := cli.NewTable("ID", "HOST", "PORT", "RACK", "LEADERS", "REPLICAS")
	for _, b := range s.Brokers {
		id := fmt.Sprint(b.ID)
		if b.ID == s.Controller {
			id += "*"
		}
		t.Row(id, b.Host, b.Port, rackCell(b.Rack), b.Leaders, b.Replicas)
	}
	return t.Write(w)
}

// rackCell is a broker's rack in a table: "-" for a broker without one, so
// the column never has a hole.
func rackCell(rack string) string {
	if rack == "" {
		return "-"
	}
	return rack
}

// errUnhealthy makes `cluster health` exit non-zero, so scripts can wait
// on it.
var errUnhealthy = errors.New("cluster is unhealthy")

func newClusterHealthCommand(g *cli.Options) *cobra.Command {
	var memorySample time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Report leaderless and under-replicated partitions and down nodes; exit 1 when unhealthy",
		Long: "Report leaderless and under-replicated partitions and down nodes, from one\n" +
			"Metadata request; exit 1 when the cluster is unhealthy.\n\n" +
			"Then, unless --memory-sample is 0, read every broker's /metrics twice,\n" +
			"--memory-sample apart (brokers from GET /v1/brokers at the admin API URL),\n" +
			"and warn about each broker whose requests waited for the request memory pool\n" +
			"(queued_max_request_bytes) or whose fetches waited for the fetch memory budget\n" +
			"in between: the share of the sample spent waiting, summed over waiters (so it\n" +
			"can pass 100%), and the pool's bytes in use of its size. Warnings, also about\n" +
			"brokers that could not be read, leave the exit status alone.\n" + admin.URLHelp,
		Example: "  weirctl cluster health\n" +
			"  weirctl cluster health --admin-url 10.0.0.5:9644 --memory-sample 5s --format json",
		Args: cobra.NoArgs,
	}
	client := admin.AddURLFlag(cmd, g)
	cmd.Flags().DurationVar(&memorySample, "memory-sample", time.Second, "time between the memory check's two reads of /metrics (0: no memory check)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if memorySample < 0 {
			return fmt.Errorf("--memory-sample must be >= 0 (0 skips the memory check), got %s", memorySample)
		}
		s, err := loadClusterSummary(cmd, g)
		if err != nil {
			return err
		}
		h := clusterHealth{clusterSummary: s, MemoryWarnings: []healthMemoryWarning{}}
		if memorySample > 0 {
			if h.MemoryWarnings, err = checkBrokerMemory(cmd.Context(), client(), memorySample); err != nil {
				return err
			}
		}
		if err := h.write(cmd.OutOrStdout(), g.Format); err != nil {
			return err
		}
		// Memory warnings are advice: only the partitions and nodes
		// decide whether the cluster is healthy.
		if !s.Healthy {
			return errUnhealthy
		}
		return nil
	}
	return cmd
}

// clusterHealth is what `cluster health` prints: the summary, with its
// fields at the top level as before, and the memory check's warnings.
type clusterHealth struct {
	clusterSummary
	MemoryWarnings []healthMemoryWarning `json:"memory_warnings"`
}

func printClusterHealth(w io.Writer, format string, s clusterSummary) error {
	return clusterHealth{clusterSummary: s, MemoryWarnings: []healthMemoryWarning{}}.write(w, format)
}

func (h clusterHealth) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, h)
	}
	s := h.clusterSummary
	ids := make([]string, len(s.Brokers))
	for i, b := range s.Brokers {
		ids[i] = fmt.Sprint(b.ID)
	}
	fmt.Fprintf(w, "HEALTHY                      %t\n", s.Healthy)
	fmt.Fprintf(w, "CONTROLLER                   %d\n", s.Controller)
	fmt.Fprintf(w, "NODES                        [%s]\n", strings.Join(ids, " "))
	fmt.Fprintf(w, "NODES DOWN                   %v\n", s.DownNodes)
	fmt.Fprintf(w, "LEADERLESS PARTITIONS        %d %v\n", len(s.Leaderless), s.Leaderless)
	fmt.Fprintf(w, "UNDER-REPLICATED PARTITIONS  %d %v\n", len(s.UnderReplicated), s.UnderReplicated)
	for _, p := range s.Problems {
		fmt.Fprintf(w, "PROBLEM                      %s\n", p)
	}
	for _, m := range h.MemoryWarnings {
		fmt.Fprintf(w, "WARNING                      %s\n", m.Message)
	}
	return nil
}
