package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/config"
)

// Bounds of a credential's iteration count: Kafka's ScramMechanism
// minimum (RFC 7677's) and maximum, the same for both hashes.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

var (
	// ErrUnknownMechanism: not a SCRAM mechanism weir implements.
	ErrUnknownMechanism = fmt.Errorf("%w: scram: unknown mechanism", kerr.UnsupportedSaslMechanism)
	// ErrInvalidCredential: a credential, or what it is derived from,
	// that a SCRAM exchange cannot use.
	ErrInvalidCredential = fmt.Errorf("%w: scram: invalid credential", kerr.UnacceptableCredential)
)

// Credential is what a SCRAM server keeps of a user's password (RFC 5802
// section 3): enough to check a client's proof and to prove itself to the
// client, not enough to log in as the user. The JSON names are those of
// the controller's log and snapshots.
type Credential struct {
	Mechanism  string `json:"mechanism"` // config.MechanismSCRAMSHA256 or …512
	Iterations int32  `json:"iterations"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"` // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte `json:"server_key"` // HMAC(SaltedPassword, "Server Key")
}

// NewCredential derives mechanism's credential for password with salt and
// iterations; SaltedPassword is PBKDF2 (RFC 5802's Hi) and is not kept.
func NewCredential(mechanism, password string, salt []byte, iterations int32) (Credential, error) {
	h, ok := Hash(mechanism)
	if !ok {
		return Credential{}, invalid(ErrUnknownMechanism, "unknown SCRAM mechanism %q", mechanism)
	}
	if password == "" {
		return Credential{}, invalid(ErrInvalidCredential, "empty password")
	}
	if err := checkInputs(iterations, salt); err != nil {
		return Credential{}, err
	}
	salted, err := pbkdf2.Key(h, password, salt, int(iterations), h().Size())
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %w", ErrInvalidCredential, err)
	}
	return FromSaltedPassword(mechanism, salted, salt, iterations)
}

// FromSaltedPassword derives the credential from a SaltedPassword, which
// is what Kafka's AlterUserScramCredentials carries (KIP-554: clients salt
// the password, brokers keep only the keys).
func FromSaltedPassword(mechanism string, salted, salt []byte, iterations int32) (Credential, error) {
	h, ok := Hash(mechanism)
	switch {
	case !ok:
		return Credential{}, invalid(ErrUnknownMechanism, "unknown SCRAM mechanism %q", mechanism)
	case len(salted) == 0:
		return Credential{}, invalid(ErrInvalidCredential, "empty salted password")
	}
	c := Credential{
		Mechanism:  mechanism,
		Iterations: iterations,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  Sum(h, HMAC(h, salted, []byte("Client Key"))),
		ServerKey:  HMAC(h, salted, []byte("Server Key")),
	}
	return c, c.Validate()
}

// Validate reports what makes c unfit for its mechanism: the checks Kafka
// applies when it stores a credential. The controller applies it to every
// credential it stores and a SCRAM server to every one it is handed, so
// the two can never disagree.
func (c Credential) Validate() error {
	h, ok := Hash(c.Mechanism)
	if !ok {
		return invalid(ErrUnknownMechanism, "unknown SCRAM mechanism %q", c.Mechanism)
	}
	if err := checkInputs(c.Iterations, c.Salt); err != nil {
		return err
	}
	if size := h().Size(); len(c.StoredKey) != size || len(c.ServerKey) != size {
		return invalid(ErrInvalidCredential, "%s keys must be %d bytes", c.Mechanism, size)
	}
	return nil
}

func checkInputs(iterations int32, salt []byte) error {
	switch {
	case iterations < MinIterations || iterations > MaxIterations:
		return invalid(ErrInvalidCredential, "%d iterations: want %d to %d", iterations, MinIterations, MaxIterations)
	case len(salt) == 0:
		return invalid(ErrInvalidCredential, "empty salt")
	}
	return nil
}

// invalidError reads as its reason alone, so that callers with their own
// error form (the controller's Result) can carry the reason unchanged,
// and is ErrUnknownMechanism or ErrInvalidCredential to errors.Is.
type invalidError struct {
	kind   error
	reason string
}

func (e *invalidError) Error() string { return e.reason }
func (e *invalidError) Unwrap() error { return e.kind }

func invalid(kind error, format string, args ...any) error {
	return &invalidError{kind: kind, reason: fmt.Sprintf(format, args...)}
}

// Code is the Kafka error a client gets for err: UNSUPPORTED_SASL_MECHANISM
// for an unknown mechanism, UNACCEPTABLE_CREDENTIAL otherwise.
func Code(err error) *kerr.Error {
	if errors.Is(err, ErrUnknownMechanism) {
		return kerr.UnsupportedSaslMechanism
	}
	return kerr.UnacceptableCredential
}

// Hash is mechanism's hash, or false when mechanism is not SCRAM.
func Hash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case config.MechanismSCRAMSHA256:
		return sha256.New, true
	case config.MechanismSCRAMSHA512:
		return sha512.New, true
	}
	return nil, false
}

// HMAC is HMAC(key, parts…) with h.
func HMAC(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// Sum is H(b) with h.
func Sum(h func() hash.Hash, b []byte) []byte {
	d := h()
	d.Write(b)
	return d.Sum(nil)
}
