package main

import (
	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// addCompletion makes shell completion part of the tree when it is built
// rather than when it first executes (cobra's default), so `completion
// bash|zsh|fish|powershell` is always listed and --format completes to its
// values. It must run after root.SetOut: cobra binds the scripts' writer
// when it creates the command.
func addCompletion(root *cobra.Command) error {
	root.InitDefaultCompletionCmd()
	return root.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(cli.OutputFormats(), cobra.ShellCompDirectiveNoFileComp))
}

// isCompletionCommand reports whether cmd generates a completion script or
// answers a completion request. Those must work even when WEIR_BROKERS or
// another global setting is invalid, or tab completion would silently die.
func isCompletionCommand(cmd *cobra.Command) bool {
	switch cmd.Name() {
	case cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return true
	}
	for c := cmd; c.HasParent(); c = c.Parent() {
		if c.Name() == "completion" && c.Parent() == cmd.Root() {
			return true
		}
	}
	return false
}
