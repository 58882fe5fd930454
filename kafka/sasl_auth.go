package kafka

// SaslHandshake v0-v1 and SaslAuthenticate v0-v2 (KIP-43, KIP-152).
//
// Behaviour:
//   - A SASL_PLAINTEXT or SASL_SSL listener requires SASL with its own
//     mechanisms (Listener.SASLMechanisms): on a new connection only
//     ApiVersions, SaslHandshake and SaslAuthenticate are served until
//     authentication succeeds; any other request closes the connection,
//     as Kafka's authenticator does.
//   - SaslHandshake v0 (raw tokens after the handshake) is advertised, as
//     librdkafka requires before it uses v1, but answered
//     UNSUPPORTED_VERSION; v1 and SaslAuthenticate are the protocol.
//   - SaslHandshake names the mechanism; one not enabled is
//     UNSUPPORTED_SASL_MECHANISM with the enabled list. SaslAuthenticate
//     carries the mechanism's messages (kafka/sasl). SCRAM-SHA-256/512
//     check the credentials stored with AlterUserScramCredentials; PLAIN
//     checks the password against the same credentials (SCRAM-SHA-512
//     first), so one set of users serves both.
//   - A failed authentication is SASL_AUTHENTICATION_FAILED after a
//     100 ms delay (Kafka's connection.failed.authentication.delay.ms),
//     then the connection is closed. The delay holds only that
//     connection's goroutine.
//   - No re-authentication (KIP-368): session_lifetime_ms is 0, and a
//     connection stays authenticated until it closes.
//   - On a PLAINTEXT or SSL listener both APIs answer ILLEGAL_SASL_STATE,
//     as Kafka does on a listener that does not use SASL, and so they do
//     after authentication.

import (
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/scram"
	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/kafka/sasl"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// failedAuthenticationDelay is Kafka's connection.failed.authentication.delay.ms.
const failedAuthenticationDelay = 100 * time.Millisecond

// saslConn is a connection's SASL progress.
type saslConn struct {
	server        sasl.Server // after a successful handshake
	authenticated bool
	user          string
}

// allowedBeforeAuth reports whether an unauthenticated connection may send
// a request of this API.
func allowedBeforeAuth(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}

func (s *Server) handleSaslHandshake(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = c.listener.SASLMechanisms
	switch {
	case !c.saslRequired() || c.sasl.authenticated || c.sasl.server != nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case req.Version == 0:
		// v0 is advertised because librdkafka checks for it before
		// using v1, but its raw, unframed tokens are not served.
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	case !slices.Contains(c.listener.SASLMechanisms, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		server, err := s.newSASLServer(req.Mechanism)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			break
		}
		c.sasl.server = server
	}
	return resp, nil
}

func (s *Server) handleSaslAuthenticate(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if !c.saslRequired() || c.sasl.authenticated || c.sasl.server == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake, or after authentication")
		return resp, nil
	}
	out, done, err := c.sasl.server.Step(req.SASLAuthBytes)
	if err != nil {
		mech := c.sasl.server.Mechanism()
		c.logger.Info("SASL authentication failed", "mechanism", mech, "err", err)
		time.Sleep(failedAuthenticationDelay)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mech))
		c.closeAfterResponse = true
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if done {
		c.sasl.authenticated, c.sasl.user = true, c.sasl.server.Username()
		c.sasl.server = nil
	}
	return resp, nil
}

// newSASLServer starts a conversation of an enabled mechanism, checking
// the cluster's SCRAM credentials.
func (s *Server) newSASLServer(mechanism string) (sasl.Server, error) {
	if mechanism == config.MechanismPlain {
		return sasl.NewPlainServer(s.security.VerifyPassword), nil
	}
	return sasl.NewScramServer(mechanism, s.scramLookup(mechanism), nil, sasl.WithDecoyKey(s.saslDecoyKey[:]))
}

func (s *Server) scramLookup(mechanism string) func(string) (scram.Credential, bool) {
	return func(user string) (scram.Credential, bool) {
		c, ok := s.security.ScramCredential(user, mechanism)
		return c.Credential, ok
	}
}

// newDecoyKey keys the salts an unknown SCRAM user is shown, so they
// look like a real user's and stay the same for this process.
func newDecoyKey() (key [32]byte) {
	rand.Read(key[:])
	return key
}
