package bench

import (
	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/fanout"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/idlefetch"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/memory"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/scale"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/soak"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// NewCommand is weirctl bench, with every benchmark under it.
func NewCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency",
		Long: "Benchmarks stop when --records are done, when --duration elapses, on\n" +
			"Ctrl-C, or when no record completes for --timeout. Progress goes to\n" +
			"stderr once a second; the summary goes to stdout. MB means 2^20 bytes.",
	}
	cmd.AddCommand(newProduceCommand(g), newConsumeCommand(g), fanout.NewCommand(g), idlefetch.NewCommand(g), memory.NewCommand(g), soak.NewCommand(g), scale.NewCommand(g))
	return cmd
}
