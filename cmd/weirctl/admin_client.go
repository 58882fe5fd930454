package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

const (
	adminURLEnv     = "WEIR_ADMIN_URL"
	defaultAdminURL = "http://127.0.0.1:9644"

	// adminURLHelp is the sentence every admin-API command's help repeats,
	// so users learn the same precedence everywhere.
	adminURLHelp = "The URL comes from --admin-url, else " + adminURLEnv + ", else " + defaultAdminURL + ".\n" +
		"When the cluster sets admin_api_require_auth, pass --admin-user and\n" +
		"--admin-password (or " + adminUserEnv + " and " + adminPasswordEnv + "), or a client\n" +
		"certificate (--admin-tls-cert, --admin-tls-key) to an https:// URL."

	// maxAdminResponse bounds what weirctl buffers from a broker, so a
	// wrong URL pointing at something that streams cannot exhaust memory.
	maxAdminResponse = 16 << 20
)

// adminClient talks to one broker's admin HTTP API.
type adminClient struct {
	base string
	http *http.Client
}

// addAdminURLFlag registers --admin-url and the credential flags
// (admin_client_auth.go) on cmd for it and its subcommands and returns
// how they build their client. The URL and credentials are resolved only
// when a subcommand runs, after flags are parsed.
func addAdminURLFlag(cmd *cobra.Command, g *globalOptions) func() *adminClient {
	var (
		adminURL string
		creds    adminCredentials
	)
	cmd.PersistentFlags().StringVar(&adminURL, "admin-url", "", "admin API base URL, http:// or https:// (env "+adminURLEnv+", default "+defaultAdminURL+")")
	addAdminCredentialFlags(cmd, &creds)
	return func() *adminClient {
		base := resolveAdminURL(adminURL)
		return &adminClient{base: base, http: newAdminHTTPClient(base, creds, g.timeout)}
	}
}

// resolveAdminURL applies flag > environment > default, and accepts a bare
// host:port because that is how admin_addr is written in broker configs.
func resolveAdminURL(flag string) string {
	u := flag
	if u == "" {
		u = strings.TrimSpace(os.Getenv(adminURLEnv))
	}
	if u == "" {
		u = defaultAdminURL
	}
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	return strings.TrimRight(u, "/")
}

// adminError is a non-2xx answer: the broker's message, or for a refused
// PUT /v1/cluster_config the property → problem map.
type adminError struct {
	status   int
	message  string
	problems map[string]string
}

func (e *adminError) Error() string {
	if e.status == http.StatusUnauthorized || e.status == http.StatusForbidden {
		// The message says what to do; the code adds nothing.
		return "admin API: " + e.message
	}
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

// parseAdminError reads an error body. A "message" string wins even next
// to other fields, so a broker that adds detail to its errors still shows
// its message; an object of only strings is a property → problem map;
// anything else is shown as the raw text.
func parseAdminError(status int, data []byte) *adminError {
	e := &adminError{status: status}
	var msg struct {
		Message *string `json:"message"`
	}
	var problems map[string]string
	switch {
	case json.Unmarshal(data, &msg) == nil && msg.Message != nil:
		e.message = *msg.Message
	case json.Unmarshal(data, &problems) == nil && len(problems) > 0:
		e.problems = problems
	default:
		e.message = strings.TrimSpace(string(data))
	}
	if e.message == "" && len(e.problems) == 0 {
		e.message = http.StatusText(status)
	}
	return e
}

// refusal is the error for a non-2xx answer. A 401 says which flags
// give credentials, or that the ones given were refused; a 403 keeps the
// broker's message ("user bob is not a superuser: ...").
func (c *adminClient) refusal(status int, data []byte) *adminError {
	e := parseAdminError(status, data)
	switch status {
	case http.StatusUnauthorized:
		switch sent := sentCredentials(c.http); {
		case sent.user != "":
			e.message = fmt.Sprintf("user %s: %s", sent.user, e.message)
		case sent.certFile != "":
			e.message = "authentication required: the broker did not accept the client certificate " + sent.certFile +
				"; pass --admin-user/--admin-password"
		default:
			e.message = "authentication required: pass --admin-user/--admin-password (or " +
				adminUserEnv + "/" + adminPasswordEnv + ")"
		}
	case http.StatusForbidden:
		if e.message == http.StatusText(status) {
			e.message = "forbidden: changes need a superuser (the superusers property)"
		}
	}
	return e
}

// do sends body (if any) as JSON and decodes a 2xx JSON answer into out
// (if not nil), keeping numbers exact.
func (c *adminClient) do(ctx context.Context, method, path string, body, out any) error {
	var data []byte
	contentType := ""
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return fmt.Errorf("admin API: encoding the %s %s body: %w", method, path, err)
		}
		contentType = "application/json"
	}
	return c.send(ctx, method, path, contentType, data, out)
}

// send is do for bodies that are not JSON, such as a license's text; an
// empty contentType sends no body.
func (c *adminClient) send(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	var rd io.Reader
	if contentType != "" {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminResponse))
	if err != nil {
		return fmt.Errorf("admin API: reading %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return c.refusal(resp.StatusCode, data)
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
