package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// Bounds of a SCRAM credential's iteration count: Kafka's ScramMechanism
// minimum (RFC 7677's) and maximum, the same for both hashes.
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// Credential is what a SCRAM server keeps of a user's password (RFC 5802
// section 3): enough to check a client's proof and to prove itself to the
// client, not enough to log in as the user.
type Credential struct {
	Mechanism  string // MechanismScramSHA256 or MechanismScramSHA512
	Salt       []byte
	Iterations int
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// NewCredential derives mechanism's credential for password with salt and
// iterations; SaltedPassword is PBKDF2 (RFC 5802's Hi) and is not kept.
func NewCredential(mechanism, password string, salt []byte, iterations int) (Credential, error) {
	h, ok := scramHash(mechanism)
	if !ok {
		return Credential{}, fmt.Errorf("%w: %q is not SCRAM", ErrUnknownMechanism, mechanism)
	}
	switch {
	case password == "":
		return Credential{}, fmt.Errorf("%w: empty password", ErrInvalidCredential)
	case len(salt) == 0:
		return Credential{}, fmt.Errorf("%w: empty salt", ErrInvalidCredential)
	case iterations < MinScramIterations || iterations > MaxScramIterations:
		return Credential{}, fmt.Errorf("%w: %d iterations, want %d to %d", ErrInvalidCredential, iterations, MinScramIterations, MaxScramIterations)
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %w", ErrInvalidCredential, err)
	}
	return CredentialFromSaltedPassword(mechanism, salted, salt, iterations)
}

// CredentialFromSaltedPassword derives the credential from a
// SaltedPassword, which is what Kafka's AlterUserScramCredentials carries
// (KIP-554: clients salt the password, brokers keep only the keys).
func CredentialFromSaltedPassword(mechanism string, salted, salt []byte, iterations int) (Credential, error) {
	h, ok := scramHash(mechanism)
	switch {
	case !ok:
		return Credential{}, fmt.Errorf("%w: %q is not SCRAM", ErrUnknownMechanism, mechanism)
	case len(salted) == 0:
		return Credential{}, fmt.Errorf("%w: empty salted password", ErrInvalidCredential)
	}
	c := Credential{
		Mechanism:  mechanism,
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  hashSum(h, hmacSum(h, salted, []byte("Client Key"))),
		ServerKey:  hmacSum(h, salted, []byte("Server Key")),
	}
	return c, c.validate(mechanism)
}

// validate reports what makes c unfit for a mechanism server: the checks
// Kafka applies when it stores a credential, so a lookup backed by
// Kafka-valid storage never fails them.
func (c Credential) validate(mechanism string) error {
	h, _ := scramHash(mechanism)
	switch {
	case c.Mechanism != mechanism:
		return fmt.Errorf("%w: a %q credential for a %s exchange", ErrInvalidCredential, c.Mechanism, mechanism)
	case len(c.Salt) == 0:
		return fmt.Errorf("%w: empty salt", ErrInvalidCredential)
	case c.Iterations < MinScramIterations || c.Iterations > MaxScramIterations:
		return fmt.Errorf("%w: %d iterations, want %d to %d", ErrInvalidCredential, c.Iterations, MinScramIterations, MaxScramIterations)
	case len(c.StoredKey) != h().Size() || len(c.ServerKey) != h().Size():
		return fmt.Errorf("%w: %s keys must be %d bytes", ErrInvalidCredential, mechanism, h().Size())
	}
	return nil
}

// scramHash is mechanism's hash, or false when mechanism is not SCRAM.
func scramHash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case MechanismScramSHA256:
		return sha256.New, true
	case MechanismScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

func hmacSum(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func hashSum(h func() hash.Hash, b []byte) []byte {
	d := h()
	d.Write(b)
	return d.Sum(nil)
}
