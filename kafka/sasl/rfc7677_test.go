package sasl

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/weir-broker/weir/broker/scram"
	"github.com/weir-broker/weir/config"
)

// RFC 7677 section 3's SCRAM-SHA-256 example: user "user", password
// "pencil".
const (
	rfcUser        = "user"
	rfcPassword    = "pencil"
	rfcSalt        = "W22ZaJ0SNY7soEsUEjb6gQ=="
	rfcIterations  = 4096
	rfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfcServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfcClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

	// Derived independently of this package (Python's hashlib.pbkdf2_hmac
	// and hmac): the RFC does not list them.
	rfcStoredKey = "586e5df283e6dceb5c3e791d8b8528ec191e664045ce971792e2e6b5bb13e2a6"
	rfcServerKey = "c1f3cbc1c13a9d35a14c0990eed97629ea225863e566a4314ab99f3f00e5d9d5"
)

func rfcCredential(t testing.TB) scram.Credential {
	t.Helper()
	salt, err := base64.StdEncoding.DecodeString(rfcSalt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := scram.NewCredential(config.MechanismSCRAMSHA256, rfcPassword, salt, rfcIterations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRFC7677Credential(t *testing.T) {
	c := rfcCredential(t)
	if got := hex.EncodeToString(c.StoredKey); got != rfcStoredKey {
		t.Errorf("StoredKey %s, want %s", got, rfcStoredKey)
	}
	if got := hex.EncodeToString(c.ServerKey); got != rfcServerKey {
		t.Errorf("ServerKey %s, want %s", got, rfcServerKey)
	}
	if c.Mechanism != config.MechanismSCRAMSHA256 || c.Iterations != rfcIterations || base64.StdEncoding.EncodeToString(c.Salt) != rfcSalt {
		t.Errorf("credential %+v", c)
	}
}

// The server's side of the RFC's exchange, byte for byte, with the RFC's
// server nonce read from a fixed source.
func TestRFC7677Exchange(t *testing.T) {
	cred := rfcCredential(t)
	lookup := func(user string) (scram.Credential, bool) { return cred, user == rfcUser }
	s, err := NewScramServer(config.MechanismSCRAMSHA256, lookup, strings.NewReader(rfcServerNonce))
	if err != nil {
		t.Fatal(err)
	}
	if got := step(t, s, rfcClientFirst); got != rfcServerFirst {
		t.Fatalf("server-first\n got %s\nwant %s", got, rfcServerFirst)
	}
	if s.Username() != "" {
		t.Fatal("a user before the proof")
	}
	out, done, err := s.Step([]byte(rfcClientFinal))
	if err != nil || !done || string(out) != rfcServerFinal {
		t.Fatalf("server-final %q, done %v, %v; want %q", out, done, err, rfcServerFinal)
	}
	if s.Username() != rfcUser {
		t.Fatalf("user %q", s.Username())
	}
	checkEnded(t, s)
}
