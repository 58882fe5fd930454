package sasl

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/weir-broker/weir/config"
)

// PlainVerifier reports whether password is user's. It sees the password
// in clear, so it should compare in constant time (or against a slow hash)
// and never log it.
type PlainVerifier func(user, password string) bool

// PlainServer is a PLAIN conversation: one client message, answered with
// nothing. Use NewPlainServer.
type PlainServer struct {
	verify PlainVerifier
	state  state
	user   string
}

var _ Server = (*PlainServer)(nil)

// NewPlainServer starts a PLAIN conversation checking passwords with
// verify; a nil verify accepts no one.
func NewPlainServer(verify PlainVerifier) *PlainServer {
	return &PlainServer{verify: verify}
}

func (*PlainServer) Mechanism() string { return config.MechanismPlain }

func (s *PlainServer) Username() string { return s.user }

// Step checks the client's one message, authzid NUL authcid NUL passwd.
// As Kafka's PlainSaslServer, an authorization id other than the user is
// refused: weir has no proxy authorisation.
func (s *PlainServer) Step(clientMessage []byte) ([]byte, bool, error) {
	if s.state != stateFirst {
		return nil, false, ErrIllegalState
	}
	s.state = stateFailed
	authzid, user, password, err := parsePlain(clientMessage)
	if err != nil {
		return nil, false, err
	}
	// Checked before the password (Kafka checks it after) so that the
	// answer to a wrong authzid never says whether the password was right.
	if authzid != "" && authzid != user {
		return nil, false, fmt.Errorf("%w: authorization id %q is not the user %q", ErrAuthenticationFailed, authzid, user)
	}
	if s.verify == nil || !s.verify(user, password) {
		return nil, false, fmt.Errorf("%w: invalid user name or password", ErrAuthenticationFailed)
	}
	s.state, s.user = stateDone, user
	return nil, true, nil
}

// parsePlain splits an RFC 4616 message. Like Kafka it wants exactly three
// fields and a non-empty user and password; unlike Kafka, which decodes
// leniently, it wants UTF-8.
func parsePlain(msg []byte) (authzid, user, password string, err error) {
	if !utf8.Valid(msg) {
		return "", "", "", fmt.Errorf("%w: PLAIN message is not UTF-8", ErrMalformed)
	}
	fields := strings.Split(string(msg), "\x00")
	switch {
	case len(fields) != 3:
		return "", "", "", fmt.Errorf("%w: PLAIN message has %d fields, want 3 (authzid, user, password)", ErrMalformed, len(fields))
	case fields[1] == "":
		return "", "", "", fmt.Errorf("%w: PLAIN user name is empty", ErrMalformed)
	case fields[2] == "":
		return "", "", "", fmt.Errorf("%w: PLAIN password is empty", ErrMalformed)
	}
	return fields[0], fields[1], fields[2], nil
}
