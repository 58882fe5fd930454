package sasl

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/scram"
)

// ScramServer is a SCRAM conversation (RFC 5802): client-first, answered
// with server-first; client-final, answered with server-final. Use
// NewScramServer.
type ScramServer struct {
	mechanism string
	hash      func() hash.Hash
	lookup    func(user string) (scram.Credential, bool)
	nonceSrc  io.Reader
	decoyKey  []byte

	state state
	user  string // authenticated user, once done

	// Between the two steps.
	claimed    string           // the user client-first names
	known      bool             // whether cred is the user's or a decoy
	cred       scram.Credential // the user's or a decoy
	gs2Header  string           // what client-final's c= must encode
	nonce      string           // client nonce + server nonce
	authPrefix string           // client-first-message-bare "," server-first-message ","
}

var _ Server = (*ScramServer)(nil)

// NewScramServer starts a conversation for mechanism (config.MechanismSCRAMSHA256
// or config.MechanismSCRAMSHA512). lookup finds a user's credential for that
// mechanism; a nil lookup knows no one. nonce is the source of server
// nonces; nil means crypto/rand.
func NewScramServer(mechanism string, lookup func(user string) (scram.Credential, bool), nonce io.Reader, opts ...ScramOption) (*ScramServer, error) {
	h, ok := scram.Hash(mechanism)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not SCRAM", scram.ErrUnknownMechanism, mechanism)
	}
	if nonce == nil {
		nonce = rand.Reader
	}
	s := &ScramServer{mechanism: mechanism, hash: h, lookup: lookup, nonceSrc: nonce}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

func (s *ScramServer) Mechanism() string { return s.mechanism }

func (s *ScramServer) Username() string { return s.user }

// Step answers client-first-message with server-first-message, then
// client-final-message with server-final-message and done. A wrong proof,
// for a known user or not, fails with ErrAuthenticationFailed and an
// "e=invalid-proof" message.
func (s *ScramServer) Step(clientMessage []byte) ([]byte, bool, error) {
	switch s.state {
	case stateFirst:
		out, err := s.first(clientMessage)
		if err != nil {
			s.end(stateFailed)
			return nil, false, err
		}
		s.state = stateFinal
		return []byte(out), false, nil
	case stateFinal:
		out, err := s.final(clientMessage)
		if err != nil {
			s.end(stateFailed)
			return out, false, err
		}
		s.user = s.claimed
		s.end(stateDone)
		return out, true, nil
	default:
		return nil, false, ErrIllegalState
	}
}

func (s *ScramServer) first(msg []byte) (string, error) {
	cf, err := parseClientFirst(msg)
	if err != nil {
		return "", err
	}
	// The decoy is derived for every user, known or not, so that both
	// take the same work.
	decoy := s.decoy(cf.user)
	var cred scram.Credential
	var known bool
	if s.lookup != nil {
		cred, known = s.lookup(cf.user)
	}
	if known {
		if err := usable(cred, s.mechanism); err != nil {
			// The lookup's fault, not the client's: Kafka too fails here.
			return "", fmt.Errorf("%w: sasl: user %q: %w", kerr.SaslAuthenticationFailed, cf.user, err)
		}
	} else {
		cred = decoy
	}
	snonce, err := serverNonce(s.nonceSrc)
	if err != nil {
		return "", err
	}
	s.claimed, s.known, s.cred = cf.user, known, cred
	s.gs2Header = cf.gs2Header
	s.nonce = cf.nonce + snonce
	sf := serverFirst(s.nonce, cred.Salt, int(cred.Iterations))
	s.authPrefix = cf.bare + "," + sf + ","
	return sf, nil
}

func (s *ScramServer) final(msg []byte) ([]byte, error) {
	cf, err := parseClientFinal(msg)
	if err != nil {
		return serverError(errInvalidEncoding), err
	}
	// Without channel binding c= is the GS2 header itself ("biws" for
	// "n,,"). Kafka does not check it; RFC 5802 says to.
	if cf.channelBinding != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return serverError(errChannelBindings), fmt.Errorf("%w: SCRAM channel binding %q does not match the GS2 header", ErrAuthenticationFailed, cf.channelBinding)
	}
	// Kafka's rule: the nonce must end with the one the server sent.
	// librdkafka sends its own nonce again in front of it; the proof,
	// computed over the message as sent, still binds the nonce.
	if !strings.HasSuffix(cf.nonce, s.nonce) {
		return serverError(errOtherError), fmt.Errorf("%w: SCRAM nonce is not the one the server sent", ErrAuthenticationFailed)
	}
	authMessage := []byte(s.authPrefix + cf.withoutProof)
	clientSignature := scram.HMAC(s.hash, s.cred.StoredKey, authMessage)
	if len(cf.proof) != len(clientSignature) || !s.proves(cf.proof, clientSignature) || !s.known {
		return serverError(errInvalidProof), fmt.Errorf("%w: invalid credentials", ErrAuthenticationFailed)
	}
	serverSignature := scram.HMAC(s.hash, s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSignature)), nil
}

// proves reports whether proof recovers a ClientKey that hashes to
// StoredKey, comparing in constant time.
func (s *ScramServer) proves(proof, clientSignature []byte) bool {
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, clientSignature)
	return subtle.ConstantTimeCompare(scram.Sum(s.hash, clientKey), s.cred.StoredKey) == 1
}

// end moves to a final state and drops what the exchange held, as Kafka's
// clearCredentials does.
func (s *ScramServer) end(st state) {
	s.state = st
	s.cred, s.authPrefix, s.nonce, s.gs2Header, s.claimed = scram.Credential{}, "", "", "", ""
}

// usable reports what makes a looked-up credential unfit for this
// exchange: another mechanism's, or not one Kafka would have stored.
func usable(c scram.Credential, mechanism string) error {
	if c.Mechanism != mechanism {
		return fmt.Errorf("%w: a %q credential for a %s exchange", scram.ErrInvalidCredential, c.Mechanism, mechanism)
	}
	return c.Validate()
}
