package sasl

import (
	"errors"
	"strings"
	"testing"

	"github.com/weir-broker/weir/broker/scram"
	"github.com/weir-broker/weir/config"
)

// FuzzScramServer steps a SCRAM-SHA-256 server through a client-first and
// a client-final message. It must never panic, fail only with errors that
// carry a Kafka code, authenticate only "user" with the RFC 7677 proof
// (which the fixed nonce makes valid), and refuse any step after the end.
func FuzzScramServer(f *testing.F) {
	cred := rfcCredential(f)
	lookup := func(user string) (scram.Credential, bool) { return cred, user == rfcUser }
	for _, seed := range []struct{ first, final string }{
		{rfcClientFirst, rfcClientFinal},
		{rfcClientFirst, strings.Replace(rfcClientFinal, "p=dH", "p=dI", 1)},
		{rfcClientFirst, "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=AAAA"},
		{"n,a=user,n=user,r=rOprNGfwEbeRWgbNEkqO", "c=bixhPXVzZXIs,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,ext=1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="},
		{"n,,n=nobody,r=x,tokenauth=false", "c=biws,r=x%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="},
		{"n,,n=a=2Cb=3D,r=x", "c=biws,r=x,p="},
		{"n,,n=user,r=x,tokenauth=true", ""},
		{"n,,m=x,n=user,r=x", ""},
		{"y,,n=user,r=x", ""},
		{"p=tls-server-end-point,,n=user,r=x", ""},
		{"n,a=other,n=user,r=x", ""},
		{"n,,n=us=er,r=x", ""},
		{"", ""},
		{",,,,", ",,,,"},
	} {
		f.Add([]byte(seed.first), []byte(seed.final))
	}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, err := NewScramServer(config.MechanismSCRAMSHA256, lookup, strings.NewReader(rfcServerNonce))
		if err != nil {
			t.Fatal(err)
		}
		out, done, err := s.Step(first)
		if done {
			t.Fatal("done after client-first")
		}
		if err != nil {
			checkKafkaCode(t, err)
			checkEnded(t, s)
			return
		}
		if !strings.HasPrefix(string(out), "r=") || !strings.Contains(string(out), rfcServerNonce+",s=") {
			t.Fatalf("server-first %q", out)
		}
		out, done, err = s.Step(final)
		switch {
		case err != nil:
			checkKafkaCode(t, err)
			if done || !strings.HasPrefix(string(out), "e=") || s.Username() != "" {
				t.Fatalf("failed with %q, done %v, user %q", out, done, s.Username())
			}
		case !done || !strings.HasPrefix(string(out), "v=") || s.Username() != rfcUser:
			t.Fatalf("succeeded with %q, done %v, user %q", out, done, s.Username())
		}
		checkEnded(t, s)
	})
}

// FuzzPlain steps a PLAIN server through one message. It must never panic,
// authenticate only whom the verifier accepted, and refuse a second step.
func FuzzPlain(f *testing.F) {
	for _, seed := range []string{
		"\x00user\x00pencil",
		"user\x00user\x00pencil",
		"other\x00user\x00pencil",
		"\x00user\x00wrong",
		"\x00\x00pencil",
		"\x00user\x00",
		"\x00user\x00pencil\x00",
		"user",
		"",
		"\x00us\xc3er\x00pencil",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var asked []string
		s := NewPlainServer(func(user, password string) bool {
			asked = append(asked, user)
			return user == "user" && password == "pencil"
		})
		out, done, err := s.Step(msg)
		if len(out) != 0 {
			t.Fatalf("server message %q", out)
		}
		switch {
		case err != nil:
			checkKafkaCode(t, err)
			if done || s.Username() != "" {
				t.Fatalf("failed, yet done %v, user %q", done, s.Username())
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("unexpected error %v", err)
			}
		case !done || s.Username() != "user" || len(asked) != 1 || asked[0] != "user":
			t.Fatalf("succeeded: done %v, user %q, verifier asked about %q", done, s.Username(), asked)
		}
		if len(asked) > 1 {
			t.Fatalf("verifier asked %d times", len(asked))
		}
		checkEnded(t, s)
	})
}
