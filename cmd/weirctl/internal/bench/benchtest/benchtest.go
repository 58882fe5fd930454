package benchtest

import (
	"io"
	"testing"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

// Run executes a weirctl command line in-process on a tree that
// has the global flags and, under bench, the one command newCmd builds:
// all of weirctl that a benchmark's own tests need.
func Run(t *testing.T, newCmd func(*cli.Options) *cobra.Command, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return clitest.Run(t, func(out io.Writer) *cobra.Command {
		root := &cobra.Command{Use: "weirctl", SilenceUsage: true, SilenceErrors: true}
		root.SetOut(out)
		bench := &cobra.Command{Use: "bench"}
		bench.AddCommand(newCmd(cli.AddGlobalFlags(root, nil)))
		root.AddCommand(bench)
		return root
	}, stdin, args...)
}
