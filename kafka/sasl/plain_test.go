package sasl

import (
	"crypto/subtle"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// verifier checks against a table of passwords.
func verifier(passwords map[string]string) PlainVerifier {
	return func(user, password string) bool {
		want, ok := passwords[user]
		return ok && subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1
	}
}

func TestPlainWithFranzGo(t *testing.T) {
	verify := verifier(map[string]string{"alice": "alice-secret", "ünï": "pässwörd"})
	for _, tc := range []struct {
		name            string
		zid, user, pass string
		want            error // nil: success
	}{
		{"success", "", "alice", "alice-secret", nil},
		{"authzid-is-user", "alice", "alice", "alice-secret", nil},
		{"utf8", "", "ünï", "pässwörd", nil},
		{"wrong-password", "", "alice", "bob-secret", ErrAuthenticationFailed},
		{"unknown-user", "", "bob", "alice-secret", ErrAuthenticationFailed},
		{"other-authzid", "bob", "alice", "alice-secret", ErrAuthenticationFailed},
		{"other-authzid-wrong-password", "bob", "alice", "x", ErrAuthenticationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := NewPlainServer(verify)
			serverErr, clientErr := exchange(t, plain.Auth{Zid: tc.zid, User: tc.user, Pass: tc.pass}.AsMechanism(), server)
			if clientErr != nil {
				t.Fatalf("client: %v", clientErr)
			}
			if !errors.Is(serverErr, tc.want) || (tc.want == nil) != (serverErr == nil) {
				t.Fatalf("server: %v, want %v", serverErr, tc.want)
			}
			if serverErr != nil {
				checkKafkaCode(t, serverErr)
				if server.Username() != "" {
					t.Fatalf("failed, yet user %q", server.Username())
				}
			} else if server.Username() != tc.user {
				t.Fatalf("user %q, want %q", server.Username(), tc.user)
			}
			checkEnded(t, server)
		})
	}
}

func TestPlainMessages(t *testing.T) {
	verify := verifier(map[string]string{"u": "p", "u\x01": "p\xc3\xa9"})
	for _, tc := range []struct {
		name string
		msg  string
		want error // nil: success
		user string
	}{
		{"no-authzid", "\x00u\x00p", nil, "u"},
		{"authzid", "u\x00u\x00p", nil, "u"},
		{"control-characters", "\x00u\x01\x00p\xc3\xa9", nil, "u\x01"},
		{"empty", "", ErrMalformed, ""},
		{"one-field", "u", ErrMalformed, ""},
		{"two-fields", "u\x00p", ErrMalformed, ""},
		{"four-fields", "\x00u\x00p\x00", ErrMalformed, ""},
		{"nuls", "\x00\x00", ErrMalformed, ""},
		{"empty-user", "\x00\x00p", ErrMalformed, ""},
		{"empty-password", "\x00u\x00", ErrMalformed, ""},
		{"invalid-utf8", "\x00u\x00p\xc3", ErrMalformed, ""},
		{"wrong-password", "\x00u\x00P", ErrAuthenticationFailed, ""},
		{"other-authzid", "v\x00u\x00p", ErrAuthenticationFailed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewPlainServer(verify)
			out, done, err := s.Step([]byte(tc.msg))
			if len(out) != 0 {
				t.Fatalf("server message %q", out)
			}
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) || done != (err == nil) {
				t.Fatalf("done %v, err %v; want %v", done, err, tc.want)
			}
			if s.Username() != tc.user {
				t.Fatalf("user %q, want %q", s.Username(), tc.user)
			}
			checkEnded(t, s)
		})
	}
}

// A nil verifier accepts no one, and is not asked about a wrong authzid.
func TestPlainVerifierUse(t *testing.T) {
	if _, _, err := NewPlainServer(nil).Step([]byte("\x00u\x00p")); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("nil verifier: %v", err)
	}
	asked := false
	s := NewPlainServer(func(string, string) bool { asked = true; return true })
	if _, _, err := s.Step([]byte("v\x00u\x00p")); !errors.Is(err, ErrAuthenticationFailed) || asked {
		t.Fatalf("other authzid: %v, verifier asked %v", err, asked)
	}
}
