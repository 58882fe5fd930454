package sasl

import (
	"bytes"
	"errors"
	"testing"
)

func TestNewCredential(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mechanism  string
		password   string
		salt       []byte
		iterations int
		want       error // nil: a credential
		keyLen     int
	}{
		{"sha256", MechanismScramSHA256, "pencil", []byte("salt"), 4096, nil, 32},
		{"sha512", MechanismScramSHA512, "pencil", []byte("salt"), 4096, nil, 64},
		{"most-iterations", MechanismScramSHA256, "pencil", []byte("salt"), 16384, nil, 32},
		{"few-iterations", MechanismScramSHA256, "pencil", []byte("salt"), 4095, ErrInvalidCredential, 0},
		{"many-iterations", MechanismScramSHA256, "pencil", []byte("salt"), 16385, ErrInvalidCredential, 0},
		{"negative-iterations", MechanismScramSHA256, "pencil", []byte("salt"), -1, ErrInvalidCredential, 0},
		{"empty-password", MechanismScramSHA256, "", []byte("salt"), 4096, ErrInvalidCredential, 0},
		{"empty-salt", MechanismScramSHA256, "pencil", nil, 4096, ErrInvalidCredential, 0},
		{"plain", MechanismPlain, "pencil", []byte("salt"), 4096, ErrUnknownMechanism, 0},
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
			if err := c.validate(tc.mechanism); err != nil {
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
