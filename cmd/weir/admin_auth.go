package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/weir-broker/weir/config"
)

const (
	// requireAuthProperty turns authentication on. It is read at every
	// request, so setting it takes effect on every broker without a
	// restart.
	requireAuthProperty = "admin_api_require_auth"

	// adminFailedAuthenticationDelay holds the answer to a failed
	// authentication, as the Kafka listener does (Kafka's
	// connection.failed.authentication.delay.ms), so that guessing
	// passwords is slow. Only the failing request waits.
	adminFailedAuthenticationDelay = 100 * time.Millisecond

	// adminAuthChallenge is the WWW-Authenticate header of a 401: HTTP
	// basic credentials, which browsers, curl -u and Prometheus's
	// basic_auth all send.
	adminAuthChallenge = `Basic realm="weir admin API", charset="UTF-8"`

	// readinessPath stays open: load balancers and orchestrators probe
	// it without credentials, and it tells nothing but "ready".
	readinessPath = "/v1/status/ready"
)

// adminAuthBackend is what the admin API's authentication needs of the
// broker; tests substitute a fake.
type adminAuthBackend interface {
	Properties() *config.Values
	// VerifyPassword checks a password against the user's SCRAM
	// credential: the admin API has the Kafka listener's users.
	VerifyPassword(user, password string) bool
	// Superuser reads the superusers property.
	Superuser(principal string) bool
}

// adminAuth authenticates and authorises admin API requests, after
// Redpanda's admin_api_require_auth: while the property is false the API
// is open (so that the first user and superuser can be set up through
// it); when true every request but the readiness probe needs HTTP basic
// credentials of a SCRAM user or a verified client certificate, and
// anything that changes the cluster, or profiles it, needs a superuser.
type adminAuth struct {
	backend adminAuthBackend
	logger  *slog.Logger
	// failureDelay holds a failed authentication's answer until it
	// returns; tests replace it.
	failureDelay func(ctx context.Context)
}

func newAdminAuth(b adminAuthBackend, logger *slog.Logger) *adminAuth {
	return &adminAuth{backend: b, logger: logger, failureDelay: sleepFailedAuthentication}
}

// sleepFailedAuthentication waits the failed-authentication delay, or
// less if the client goes away first. It holds only the request's own
// goroutine: net/http serves each request on its own.
func sleepFailedAuthentication(ctx context.Context) {
	t := time.NewTimer(adminFailedAuthenticationDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// wrap puts authentication and authorisation in front of next.
func (a *adminAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.backend.Properties().Bool(requireAuthProperty) || isReadinessProbe(r) {
			next.ServeHTTP(w, r)
			return
		}
		principal, ok := a.authenticate(w, r)
		if !ok {
			return
		}
		if needsSuperuser(r) && !a.backend.Superuser(principal) {
			a.logger.Warn("admin API request refused: not a superuser", "principal", principal,
				"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			writeError(w, http.StatusForbidden, "%s is not a superuser: %s %s needs one (the superusers property names them)",
				describePrincipal(principal), r.Method, r.URL.Path)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate returns the request's principal in Kafka's form: the
// user of valid basic credentials ("User:alice"), else the subject of a
// client certificate the admin listener verified ("User:CN=alice"), as
// the Kafka listener names them, so that superusers lists one principal
// for both APIs. Otherwise it answers 401 and returns false.
//
// Credentials that were sent are checked even when a certificate would
// do: a caller that names a user means that user.
func (a *adminAuth) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	if _, sent := r.Header["Authorization"]; sent {
		user, password, ok := r.BasicAuth()
		switch {
		case !ok:
			a.refuse(w, r, "", "the Authorization header does not hold HTTP basic credentials")
		case !a.backend.VerifyPassword(user, password):
			// Unknown user or wrong password: one answer for both, so
			// that user names cannot be probed.
			a.refuse(w, r, user, "wrong user name or password")
		default:
			return "User:" + user, true
		}
		return "", false
	}
	if r.TLS != nil {
		if principal, ok := config.PeerPrincipal(*r.TLS); ok {
			return principal, true
		}
	}
	// No credentials is not a guess: it is not delayed, and logged only
	// at debug level, so that a scraper left without credentials does
	// not flood the log.
	a.logger.Debug("admin API request without credentials refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("WWW-Authenticate", adminAuthChallenge)
	how := "HTTP basic credentials of a SCRAM user"
	if r.TLS != nil {
		how += ", or a client certificate signed by the admin listener's CA"
	}
	writeError(w, http.StatusUnauthorized, "authentication required: send %s", how)
	return "", false
}

// refuse answers a failed authentication with 401 after the delay.
func (a *adminAuth) refuse(w http.ResponseWriter, r *http.Request, user, reason string) {
	a.logger.Warn("admin API authentication failed", "user", user, "reason", reason,
		"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	a.failureDelay(r.Context())
	w.Header().Set("WWW-Authenticate", adminAuthChallenge)
	writeError(w, http.StatusUnauthorized, "authentication failed: %s", reason)
}

// isReadinessProbe reports whether r is GET or HEAD of the readiness
// endpoint itself. The path must match exactly: net/http's mux redirects
// unclean paths rather than serving them, so no other spelling reaches
// the readiness handler unauthenticated.
func isReadinessProbe(r *http.Request) bool {
	return r.URL.Path == readinessPath && (r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// needsSuperuser reports whether r may change the cluster (any method
// but GET and HEAD, including ones no endpoint serves) or profiles the
// process: profiles can expose memory contents and cost CPU.
func needsSuperuser(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return true
	}
	return r.URL.Path == "/debug/pprof" || strings.HasPrefix(r.URL.Path, "/debug/pprof/")
}

// describePrincipal names a principal for a message: "user alice",
// "user CN=admin,O=acme".
func describePrincipal(principal string) string {
	return "user " + strings.TrimPrefix(principal, "User:")
}
