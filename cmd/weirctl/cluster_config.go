package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func newClusterConfigCommand(g *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Get, set, export and import cluster properties through a broker's admin API",
		Long: "The cluster config commands use the admin HTTP API (admin_addr) of any\n" +
			"broker; changes go through the controller and reach every broker.\n" +
			admin.URLHelp,
	}
	client := admin.AddURLFlag(cmd, g)
	cmd.AddCommand(
		newConfigGetCommand(g, client),
		newConfigSetCommand(g, client),
		newConfigStatusCommand(g, client),
		newConfigExportCommand(client),
		newConfigImportCommand(g, client),
	)
	return cmd
}

// formatValue prints a JSON value the way a person types it.
func formatValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func newConfigGetCommand(g *cli.Options, client func() *admin.Client) *cobra.Command {
	return &cobra.Command{
		Use:   "get [name...]",
		Short: "Show cluster properties' effective values (all, or the named ones)",
		RunE: func(cmd *cobra.Command, names []string) error {
			var all map[string]any
			if err := client().Do(cmd.Context(), http.MethodGet, "/v1/cluster_config", nil, &all); err != nil {
				return err
			}
			out := all
			if len(names) > 0 {
				out = map[string]any{}
				for _, n := range names {
					v, ok := all[n]
					if !ok {
						return fmt.Errorf("unknown cluster property %q", n)
					}
					out[n] = v
				}
			}
			if g.Format != cli.FormatTable {
				return cli.WriteDocument(cmd.OutOrStdout(), g.Format, out)
			}
			t := cli.NewTable("NAME", "VALUE")
			for _, n := range sortedNames(out) {
				t.Row(n, formatValue(out[n]))
			}
			return t.Write(cmd.OutOrStdout())
		},
	}
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// putConfig sends one PUT and prints the new config version; a refusal
// prints every property's problem to stderr.
func putConfig(cmd *cobra.Command, g *cli.Options, c *admin.Client, upsert map[string]any, remove []string) error {
	body := map[string]any{"upsert": upsert, "remove": remove}
	var res struct {
		ConfigVersion int64 `json:"config_version"`
	}
	if err := c.Do(cmd.Context(), http.MethodPut, "/v1/cluster_config", body, &res); err != nil {
		var ae *admin.Error
		if errors.As(err, &ae) && len(ae.Problems) > 0 {
			t := cli.NewTable("PROPERTY", "PROBLEM")
			for _, n := range sortedNames(ae.Problems) {
				t.Row(n, ae.Problems[n])
			}
			t.Write(cmd.ErrOrStderr())
		}
		return err
	}
	if g.Format != cli.FormatTable {
		return cli.WriteDocument(cmd.OutOrStdout(), g.Format, res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "CONFIG-VERSION  %d\n", res.ConfigVersion)
	return nil
}

func newConfigSetCommand(g *cli.Options, client func() *admin.Client) *cobra.Command {
	return &cobra.Command{
		Use:   "set name=value...",
		Short: "Set cluster properties, all in one change (validated together; nothing changes on any error)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			upsert := map[string]any{}
			for _, a := range args {
				name, value, ok := strings.Cut(a, "=")
				if !ok || name == "" {
					return fmt.Errorf("%q: want name=value", a)
				}
				if _, dup := upsert[name]; dup {
					return fmt.Errorf("%s is set twice", name)
				}
				upsert[name] = value
			}
			return putConfig(cmd, g, client(), upsert, []string{})
		},
	}
}

func newConfigStatusCommand(g *cli.Options, client func() *admin.Client) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each live broker's applied config version and whether it needs a restart",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st []admin.ConfigStatus
			if err := client().Do(cmd.Context(), http.MethodGet, "/v1/cluster_config/status", nil, &st); err != nil {
				return err
			}
			if g.Format != cli.FormatTable {
				return cli.WriteDocument(cmd.OutOrStdout(), g.Format, st)
			}
			t := cli.NewTable("NODE", "CONFIG-VERSION", "NEEDS-RESTART", "INVALID", "UNKNOWN", "ERROR")
			for _, s := range st {
				t.Row(s.NodeID, s.ConfigVersion, s.Restart, strings.Join(s.Invalid, ","), strings.Join(s.Unknown, ","), s.Error)
			}
			return t.Write(cmd.OutOrStdout())
		},
	}
}

func newConfigExportCommand(client func() *admin.Client) *cobra.Command {
	var file string
	var all bool
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the explicitly set cluster properties (or all with --all) as YAML",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/v1/cluster_config?include_defaults=false"
			if all {
				path = "/v1/cluster_config"
			}
			var vals map[string]any
			if err := client().Do(cmd.Context(), http.MethodGet, path, nil, &vals); err != nil {
				return err
			}
			// json.Number would be written as a string; YAML wants ints.
			for n, v := range vals {
				if num, ok := v.(json.Number); ok {
					if i, err := num.Int64(); err == nil {
						vals[n] = i
					}
				}
			}
			data, err := yaml.Marshal(vals)
			if err != nil {
				return err
			}
			if len(vals) == 0 {
				data = []byte("{}\n")
			}
			if file == "" || file == "-" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			return os.WriteFile(file, data, 0o644)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to this file instead of stdout")
	cmd.Flags().BoolVar(&all, "all", false, "include properties at their defaults")
	return cmd
}

func newConfigImportCommand(g *cli.Options, client func() *admin.Client) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "import -f file",
		Short: "Make the cluster properties match a YAML file: set its values, reset explicitly set properties it omits",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("--file (-f) is required")
			}
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			var want map[string]any
			if err := yaml.Unmarshal(data, &want); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if want == nil {
				want = map[string]any{}
			}
			c := client()
			var set map[string]any
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/cluster_config?include_defaults=false", nil, &set); err != nil {
				return err
			}
			remove := []string{}
			for _, n := range sortedNames(set) {
				if _, ok := want[n]; !ok {
					remove = append(remove, n)
				}
			}
			return putConfig(cmd, g, c, want, remove)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "YAML file of property: value (- for stdin)")
	return cmd
}
