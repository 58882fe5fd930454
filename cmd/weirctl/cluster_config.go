package main

import (
	"bytes"
	"context"
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
)

const (
	adminURLEnv     = "WEIR_ADMIN_URL"
	defaultAdminURL = "http://127.0.0.1:9644"
)

// adminClient talks to one broker's admin HTTP API.
type adminClient struct {
	base string
	http *http.Client
}

// adminError is a non-2xx answer: the broker's message, or for a refused
// PUT /v1/cluster_config the property → problem map.
type adminError struct {
	status   int
	message  string
	problems map[string]string
}

func (e *adminError) Error() string {
	if len(e.problems) == 0 {
		return fmt.Sprintf("admin API: %d %s", e.status, e.message)
	}
	names := make([]string, 0, len(e.problems))
	for n := range e.problems {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("invalid cluster properties: %s", strings.Join(names, ", "))
}

func (c *adminClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("admin API: reading %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &adminError{status: resp.StatusCode}
		var obj map[string]string
		if json.Unmarshal(data, &obj) == nil {
			if m, ok := obj["message"]; ok && len(obj) == 1 {
				e.message = m
			} else {
				e.problems = obj
			}
		} else {
			e.message = strings.TrimSpace(string(data))
		}
		return e
	}
	if out == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("admin API: %s %s answered %q: %w", method, path, data, err)
	}
	return nil
}

func newClusterConfigCommand(g *globalOptions) *cobra.Command {
	var adminURL string
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Get, set, export and import cluster properties through a broker's admin API",
		Long: "The cluster config commands use the admin HTTP API (admin_addr) of any\n" +
			"broker; changes go through the controller and reach every broker.\n" +
			"The URL comes from --admin-url, else " + adminURLEnv + ", else " + defaultAdminURL + ".",
	}
	cmd.PersistentFlags().StringVar(&adminURL, "admin-url", "", "admin API base URL (env "+adminURLEnv+", default "+defaultAdminURL+")")
	client := func() *adminClient {
		u := adminURL
		if u == "" {
			u = strings.TrimSpace(os.Getenv(adminURLEnv))
		}
		if u == "" {
			u = defaultAdminURL
		}
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		return &adminClient{base: strings.TrimRight(u, "/"), http: &http.Client{Timeout: g.timeout}}
	}
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

func newConfigGetCommand(g *globalOptions, client func() *adminClient) *cobra.Command {
	return &cobra.Command{
		Use:   "get [name...]",
		Short: "Show cluster properties' effective values (all, or the named ones)",
		RunE: func(cmd *cobra.Command, names []string) error {
			var all map[string]any
			if err := client().do(cmd.Context(), http.MethodGet, "/v1/cluster_config", nil, &all); err != nil {
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
			if g.format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			t := newTable("NAME", "VALUE")
			for _, n := range sortedNames(out) {
				t.row(n, formatValue(out[n]))
			}
			return t.write(cmd.OutOrStdout())
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
func putConfig(cmd *cobra.Command, g *globalOptions, c *adminClient, upsert map[string]any, remove []string) error {
	body := map[string]any{"upsert": upsert, "remove": remove}
	var res struct {
		ConfigVersion int64 `json:"config_version"`
	}
	if err := c.do(cmd.Context(), http.MethodPut, "/v1/cluster_config", body, &res); err != nil {
		var ae *adminError
		if errors.As(err, &ae) && len(ae.problems) > 0 {
			t := newTable("PROPERTY", "PROBLEM")
			for _, n := range sortedNames(ae.problems) {
				t.row(n, ae.problems[n])
			}
			t.write(cmd.ErrOrStderr())
		}
		return err
	}
	if g.format == formatJSON {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "CONFIG-VERSION  %d\n", res.ConfigVersion)
	return nil
}

func newConfigSetCommand(g *globalOptions, client func() *adminClient) *cobra.Command {
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

type configStatus struct {
	NodeID        int32    `json:"node_id"`
	ConfigVersion int64    `json:"config_version"`
	Restart       bool     `json:"restart"`
	Invalid       []string `json:"invalid"`
	Unknown       []string `json:"unknown"`
	Error         string   `json:"error,omitempty"`
}

func newConfigStatusCommand(g *globalOptions, client func() *adminClient) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each live broker's applied config version and whether it needs a restart",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st []configStatus
			if err := client().do(cmd.Context(), http.MethodGet, "/v1/cluster_config/status", nil, &st); err != nil {
				return err
			}
			if g.format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			t := newTable("NODE", "CONFIG-VERSION", "NEEDS-RESTART", "INVALID", "UNKNOWN", "ERROR")
			for _, s := range st {
				t.row(s.NodeID, s.ConfigVersion, s.Restart, strings.Join(s.Invalid, ","), strings.Join(s.Unknown, ","), s.Error)
			}
			return t.write(cmd.OutOrStdout())
		},
	}
}

func newConfigExportCommand(client func() *adminClient) *cobra.Command {
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
			if err := client().do(cmd.Context(), http.MethodGet, path, nil, &vals); err != nil {
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

func newConfigImportCommand(g *globalOptions, client func() *adminClient) *cobra.Command {
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
			if err := c.do(cmd.Context(), http.MethodGet, "/v1/cluster_config?include_defaults=false", nil, &set); err != nil {
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
