package admin

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
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

const (
	// URLEnv is where the admin API's URL comes from without --admin-url.
	URLEnv     = "WEIR_ADMIN_URL"
	defaultURL = "http://127.0.0.1:9644"

	// URLHelp is the sentence every admin-API command's help repeats,
	// so users learn the same precedence everywhere.
	URLHelp = "The URL comes from --admin-url, else " + URLEnv + ", else " + defaultURL + ".\n" +
		"When the cluster sets admin_api_require_auth, pass --admin-user and\n" +
		"--admin-password (or " + UserEnv + " and " + PasswordEnv + "), or a client\n" +
		"certificate (--admin-tls-cert, --admin-tls-key) to an https:// URL."

	// maxResponse bounds what weirctl buffers from a broker, so a
	// wrong URL pointing at something that streams cannot exhaust memory.
	maxResponse = 16 << 20
)

// Client talks to one broker's admin HTTP API.
type Client struct {
	base string
	http *http.Client
}

// AddURLFlag registers --admin-url and the credential flags
// (credentials.go) on cmd for it and its subcommands and returns
// how they build their client. The URL and credentials are resolved only
// when a subcommand runs, after flags are parsed.
func AddURLFlag(cmd *cobra.Command, g *cli.Options) func() *Client {
	var (
		adminURL string
		creds    credentials
	)
	cmd.PersistentFlags().StringVar(&adminURL, "admin-url", "", "admin API base URL, http:// or https:// (env "+URLEnv+", default "+defaultURL+")")
	addCredentialFlags(cmd, &creds)
	return func() *Client {
		base := resolveURL(adminURL)
		return &Client{base: base, http: newHTTPClient(base, creds, g.Timeout)}
	}
}

// NewClient is a client for an admin API whose URL comes from
// elsewhere than --admin-url, so it presents no credentials.
func NewClient(base string, timeout time.Duration) *Client {
	return &Client{base: base, http: newHTTPClient(base, credentials{}, timeout)}
}

// URL is the admin API's base URL, for messages.
func (c *Client) URL() string { return c.base }

// resolveURL applies flag > environment > default, and accepts a bare
// host:port because that is how admin_addr is written in broker configs.
func resolveURL(flag string) string {
	u := flag
	if u == "" {
		u = strings.TrimSpace(os.Getenv(URLEnv))
	}
	if u == "" {
		u = defaultURL
	}
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	return strings.TrimRight(u, "/")
}

// Error is a non-2xx answer: the broker's message, or for a refused
// PUT /v1/cluster_config the property → problem map.
type Error struct {
	Status   int
	message  string
	Problems map[string]string
}

func (e *Error) Error() string {
	if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		// The message says what to do; the code adds nothing.
		return "admin API: " + e.message
	}
	if len(e.Problems) == 0 {
		return fmt.Sprintf("admin API: %d %s", e.Status, e.message)
	}
	names := make([]string, 0, len(e.Problems))
	for n := range e.Problems {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("invalid cluster properties: %s", strings.Join(names, ", "))
}

// parseError reads an error body. A "message" string wins even next
// to other fields, so a broker that adds detail to its errors still shows
// its message; an object of only strings is a property → problem map;
// anything else is shown as the raw text.
func parseError(status int, data []byte) *Error {
	e := &Error{Status: status}
	var msg struct {
		Message *string `json:"message"`
	}
	var problems map[string]string
	switch {
	case json.Unmarshal(data, &msg) == nil && msg.Message != nil:
		e.message = *msg.Message
	case json.Unmarshal(data, &problems) == nil && len(problems) > 0:
		e.Problems = problems
	default:
		e.message = strings.TrimSpace(string(data))
	}
	if e.message == "" && len(e.Problems) == 0 {
		e.message = http.StatusText(status)
	}
	return e
}

// refusal is the error for a non-2xx answer. A 401 says which flags
// give credentials, or that the ones given were refused; a 403 keeps the
// broker's message ("user bob is not a superuser: ...").
func (c *Client) refusal(status int, data []byte) *Error {
	e := parseError(status, data)
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
				UserEnv + "/" + PasswordEnv + ")"
		}
	case http.StatusForbidden:
		if e.message == http.StatusText(status) {
			e.message = "forbidden: changes need a superuser (the superusers property)"
		}
	}
	return e
}

// Do sends body (if any) as JSON and decodes a 2xx JSON answer into out
// (if not nil), keeping numbers exact.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var data []byte
	contentType := ""
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return fmt.Errorf("admin API: encoding the %s %s body: %w", method, path, err)
		}
		contentType = "application/json"
	}
	return c.Send(ctx, method, path, contentType, data, out)
}

// Send is do for bodies that are not JSON, such as a license's text; an
// empty contentType sends no body.
func (c *Client) Send(ctx context.Context, method, path, contentType string, body []byte, out any) error {
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
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
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
