package admin

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// The environment variables the admin credentials come from without
// --admin-user and --admin-password.
const (
	UserEnv     = "WEIR_ADMIN_USER"
	PasswordEnv = "WEIR_ADMIN_PASSWORD"

	// maxRedirects is net/http's own limit, kept when redirects are
	// checked for credentials.
	maxRedirects = 10
)

// credentials are what weirctl presents to a broker's admin API
// when admin_api_require_auth is on: HTTP basic credentials of a SCRAM
// user, and for an https:// URL the CA to trust and a client certificate.
type credentials struct {
	user, password            string
	caFile, certFile, keyFile string
}

// addCredentialFlags registers the credential flags on cmd for it
// and its subcommands.
func addCredentialFlags(cmd *cobra.Command, c *credentials) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&c.user, "admin-user", "", "admin API user, a SCRAM user (env "+UserEnv+")")
	pf.StringVar(&c.password, "admin-password", "", "the admin user's password (env "+PasswordEnv+", which keeps it out of the process list)")
	pf.StringVar(&c.caFile, "admin-tls-ca", "", "PEM CA file to trust for an https:// admin URL (default: the system's)")
	pf.StringVar(&c.certFile, "admin-tls-cert", "", "PEM client certificate for an https:// admin URL with client authentication")
	pf.StringVar(&c.keyFile, "admin-tls-key", "", "PEM private key of --admin-tls-cert")
}

// resolve fills the user and password from the environment where the
// flags left them empty, and checks that what was given goes together.
func (c credentials) resolve(base string) (credentials, error) {
	if c.user == "" {
		c.user = strings.TrimSpace(os.Getenv(UserEnv))
	}
	if c.password == "" {
		c.password = os.Getenv(PasswordEnv)
	}
	switch {
	case c.user != "" && c.password == "":
		return c, fmt.Errorf("--admin-user %s needs --admin-password (or %s)", c.user, PasswordEnv)
	case c.user == "" && c.password != "":
		return c, fmt.Errorf("--admin-password needs --admin-user (or %s)", UserEnv)
	case (c.certFile == "") != (c.keyFile == ""):
		return c, errors.New("--admin-tls-cert and --admin-tls-key go together")
	}
	if c.caFile != "" || c.certFile != "" {
		if u, err := url.Parse(base); err == nil && u.Scheme != "https" {
			// Certificates on a plain HTTP URL would silently do nothing.
			return c, fmt.Errorf("--admin-tls-ca/--admin-tls-cert need an https:// admin URL, not %s", base)
		}
	}
	return c, nil
}

// newHTTPClient returns the HTTP client for the admin API at base:
// TLS as the files say, and the basic credentials on every request,
// including those to the cluster's other brokers (found through
// GET /v1/brokers), whose admin APIs take the same users. A setting that
// does not work gives a client whose every request fails with the
// reason, which commands report as they report any admin API error.
func newHTTPClient(base string, flags credentials, timeout time.Duration) *http.Client {
	creds, err := flags.resolve(base)
	var rt http.RoundTripper
	if err == nil {
		rt, err = creds.transport()
	}
	if err != nil {
		rt = failingTransport{err: err}
	}
	cl := &http.Client{Timeout: timeout, Transport: rt}
	if creds.user != "" {
		cl.CheckRedirect = sameOriginRedirects
	}
	return cl
}

// sameOriginRedirects follows redirects only within the scheme and host
// the request went to: the credentials go with every request, and must
// not go to wherever a redirect points.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("not following a redirect to %s with the admin credentials", req.URL.Redacted())
	}
	return nil
}

func (c credentials) transport() (http.RoundTripper, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsCfg
	return &authTransport{creds: c, next: t}, nil
}

// authTransport adds the basic credentials to every request.
type authTransport struct {
	creds credentials
	next  http.RoundTripper
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.creds.user == "" {
		return t.next.RoundTrip(r)
	}
	// A RoundTripper must not change the request it is given.
	r = r.Clone(r.Context())
	r.SetBasicAuth(t.creds.user, t.creds.password)
	return t.next.RoundTrip(r)
}

// failingTransport fails every request with err, without sending it.
type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return nil, f.err
}

// sentCredentials is what a client presents, as far as messages about
// a refusal need to know.
func sentCredentials(cl *http.Client) credentials {
	if t, ok := cl.Transport.(*authTransport); ok {
		return t.creds
	}
	return credentials{}
}

// tlsConfig loads the CA and client certificate files.
func (c credentials) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.caFile != "" {
		data, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("--admin-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--admin-tls-ca %s: no PEM certificate found", c.caFile)
		}
		cfg.RootCAs = pool
	}
	if c.certFile != "" {
		cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--admin-tls-cert/--admin-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
