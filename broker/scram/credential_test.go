package scram

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/config"
)

func TestNewCredential(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mechanism  string
		password   string
		salt       []byte
		iterations int32
		want       error // nil: a credential
		keyLen     int
	}{
		{"sha256", config.MechanismSCRAMSHA256, "pencil", []byte("salt"), 4096, nil, 32},
		{"sha512", config.MechanismSCRAMSHA512, "pencil", []byte("salt"), 4096, nil, 64},
		{"most-iterations", config.MechanismSCRAMSHA256, "pencil", []byte("salt"), 16384, nil, 32},
		{"few-iterations", config.MechanismSCRAMSHA256, "pencil", []byte("salt"), 4095, ErrInvalidCredential, 0},
		{"many-iterations", config.MechanismSCRAMSHA256, "pencil", []byte("salt"), 16385, ErrInvalidCredential, 0},
		{"negative-iterations", config.MechanismSCRAMSHA256, "pencil", []byte("salt"), -1, ErrInvalidCredential, 0},
		{"empty-password", config.MechanismSCRAMSHA256, "", []byte("salt"), 4096, ErrInvalidCredential, 0},
		{"empty-salt", config.MechanismSCRAMSHA256, "pencil", nil, 4096, ErrInvalidCredential, 0},
		{"plain", config.MechanismPlain, "pencil", []byte("salt"), 4096, ErrUnknownMechanism, 0},
		{"sha1", "SCRAM-SHA-1", "pencil", []byte("salt"), 4096, ErrUnknownMechanism, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCredential(tc.mechanism, tc.password, tc.salt, tc.iterations)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			if len(c.StoredKey) != tc.keyLen || len(c.ServerKey) != tc.keyLen || c.Iterations != tc.iterations || c.Mechanism != tc.mechanism {
				t.Fatalf("credential %+v", c)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("own credential invalid: %v", err)
			}
			// The salt is the credential's own.
			tc.salt[0] ^= 1
			if bytes.Equal(c.Salt, tc.salt) {
				t.Fatal("credential shares the caller's salt")
			}
		})
	}
}

// Validate's errors read as their reason alone and carry the Kafka code a
// client is answered with.
func TestValidateErrors(t *testing.T) {
	good, err := NewCredential(config.MechanismSCRAMSHA512, "pencil", []byte("salt"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Credential)
		reason string
		code   *kerr.Error
	}{
		{"unknown mechanism", func(c *Credential) { c.Mechanism = "SCRAM-SHA-1" }, `unknown SCRAM mechanism "SCRAM-SHA-1"`, kerr.UnsupportedSaslMechanism},
		{"iterations", func(c *Credential) { c.Iterations = 100 }, "100 iterations: want 4096 to 16384", kerr.UnacceptableCredential},
		{"salt", func(c *Credential) { c.Salt = nil }, "empty salt", kerr.UnacceptableCredential},
		{"keys", func(c *Credential) { c.StoredKey = c.StoredKey[:32] }, "SCRAM-SHA-512 keys must be 64 bytes", kerr.UnacceptableCredential},
	} {
		c := good
		tc.change(&c)
		err := c.Validate()
		if err == nil || err.Error() != tc.reason || Code(err) != tc.code {
			t.Errorf("%s: %v (code %v), want %q (%v)", tc.name, err, Code(err), tc.reason, tc.code)
		}
	}
}
