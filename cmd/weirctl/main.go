package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func main() {
	// A signal cancels the context rather than killing the process so that
	// consumers commit what they printed and bench still prints a summary.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand(os.Stdout).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "weirctl:", err)
		os.Exit(1)
	}
}

// newRootCommand builds the whole command tree. Output goes to out; tests
// swap stdin and stderr with SetIn/SetErr on the returned command.
func newRootCommand(out io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "weirctl",
		Short: "Administer and exercise a weir (Kafka-compatible) cluster",
		Long: "weirctl manages topics, produces and consumes records, and benchmarks\n" +
			"a weir cluster over the Kafka protocol.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	g := cli.AddGlobalFlags(root, isCompletionCommand)

	root.AddCommand(
		newTopicCommand(g),
		newGroupCommand(g),
		newTransactionCommand(g),
		newProducerCommand(g),
		newClusterCommand(g),
		newACLCommand(g),
		newProduceCommand(g),
		newConsumeCommand(g),
		bench.NewCommand(g),
	)
	if err := addCompletion(root); err != nil {
		// Only a renamed flag gets here, which every test run would catch.
		panic(err)
	}
	return root
}
