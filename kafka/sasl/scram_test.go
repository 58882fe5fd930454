package sasl

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/broker/scram"
	"github.com/weir-broker/weir/config"
)

// Full exchanges against franz-go's SCRAM client, for both hashes.
func TestScramWithFranzGo(t *testing.T) {
	for _, mechanism := range []string{config.MechanismSCRAMSHA256, config.MechanismSCRAMSHA512} {
		lookup := credentials(t, mechanism, map[string]string{
			"alice":   "alice-secret",
			"a,b=c":   "escaped",
			"ünïcødé": "pässwörd",
		})
		for _, tc := range []struct {
			name      string
			zid, user string
			pass      string
			token     bool
			want      error // the server's; nil: success
		}{
			{name: "success", user: "alice", pass: "alice-secret"},
			{name: "authzid-is-user", zid: "alice", user: "alice", pass: "alice-secret"},
			{name: "escaped-name", user: "a,b=c", pass: "escaped"},
			{name: "escaped-name-authzid", zid: "a,b=c", user: "a,b=c", pass: "escaped"},
			{name: "utf8-name", user: "ünïcødé", pass: "pässwörd"},
			{name: "wrong-password", user: "alice", pass: "alice-secret!", want: ErrAuthenticationFailed},
			{name: "unknown-user", user: "mallory", pass: "alice-secret", want: ErrAuthenticationFailed},
			{name: "unescaped-lookalike", user: "a=2Cb=3Dc", pass: "escaped", want: ErrAuthenticationFailed},
			{name: "other-authzid", zid: "bob", user: "alice", pass: "alice-secret", want: ErrAuthenticationFailed},
			{name: "delegation-token", user: "alice", pass: "alice-secret", token: true, want: ErrUnsupported},
		} {
			t.Run(mechanism+"/"+tc.name, func(t *testing.T) {
				auth := kscram.Auth{Zid: tc.zid, User: tc.user, Pass: tc.pass, IsToken: tc.token}
				client := auth.AsSha256Mechanism()
				if mechanism == config.MechanismSCRAMSHA512 {
					client = auth.AsSha512Mechanism()
				}
				server, err := NewScramServer(mechanism, lookup, nil)
				if err != nil {
					t.Fatal(err)
				}
				serverErr, clientErr := exchange(t, client, server)
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
}

// scramRun is a SCRAM exchange driven by hand: franz-go's client, with the
// messages in between open to tampering.
type scramRun struct {
	server               *ScramServer
	clientFirst          []byte
	serverFirst          []byte
	clientFinal          []byte
	clientFinishesServer func(serverFinal []byte) error
}

func startScram(t *testing.T, mechanism, user, pass string, lookup func(string) (scram.Credential, bool), opts ...ScramOption) scramRun {
	t.Helper()
	auth := kscram.Auth{User: user, Pass: pass}
	client := auth.AsSha256Mechanism()
	if mechanism == config.MechanismSCRAMSHA512 {
		client = auth.AsSha512Mechanism()
	}
	session, first, err := client.Authenticate(context.Background(), "weir:9092")
	if err != nil {
		t.Fatal(err)
	}
	server, err := NewScramServer(mechanism, lookup, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sf, done, err := server.Step(first)
	if err != nil || done {
		t.Fatalf("server-first: done %v, %v", done, err)
	}
	_, final, err := session.Challenge(sf)
	if err != nil {
		t.Fatal(err)
	}
	return scramRun{
		server: server, clientFirst: first, serverFirst: sf, clientFinal: final,
		clientFinishesServer: func(serverFinal []byte) error {
			_, _, err := session.Challenge(serverFinal)
			return err
		},
	}
}

// The final step's failures: each gives an e= message and ends the
// conversation.
func TestScramFinalFailures(t *testing.T) {
	for _, mechanism := range []string{config.MechanismSCRAMSHA256, config.MechanismSCRAMSHA512} {
		lookup := credentials(t, mechanism, map[string]string{"alice": "alice-secret"})
		replayed := startScram(t, mechanism, "alice", "alice-secret", lookup)
		if _, _, err := replayed.server.Step(replayed.clientFinal); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name    string
			user    string
			pass    string
			tamper  func(run scramRun) []byte
			want    error
			wantMsg string
		}{
			{
				name: "replayed-final", user: "alice", pass: "alice-secret",
				tamper:  func(scramRun) []byte { return replayed.clientFinal },
				want:    ErrAuthenticationFailed,
				wantMsg: "e=other-error",
			},
			{
				name: "tampered-nonce", user: "alice", pass: "alice-secret",
				tamper: func(run scramRun) []byte {
					// The client's nonce with a server nonce of its own.
					// Its last character changed: to X, or to Y when it
					// is X already (one nonce in 64), which left it as it
					// was.
					attrs := strings.Split(string(run.clientFinal), ",")
					last := "X"
					if strings.HasSuffix(attrs[1], last) {
						last = "Y"
					}
					attrs[1] = attrs[1][:len(attrs[1])-1] + last
					return []byte(strings.Join(attrs, ","))
				},
				want:    ErrAuthenticationFailed,
				wantMsg: "e=other-error",
			},
			{
				name: "nonce-with-prefix", user: "alice", pass: "alice-secret",
				tamper: func(run scramRun) []byte {
					// A nonce ending with the right one passes the nonce
					// check (librdkafka sends its own nonce again in front,
					// and Kafka accepts that), but the proof covers the
					// message as sent, so an altered one fails.
					return bytes.Replace(run.clientFinal, []byte(",r="), []byte(",r=evil"), 1)
				},
				want:    ErrAuthenticationFailed,
				wantMsg: "e=invalid-proof",
			},
			{
				name: "tampered-proof", user: "alice", pass: "alice-secret",
				tamper: func(run scramRun) []byte {
					i := bytes.LastIndex(run.clientFinal, []byte(",p="))
					proof, err := base64.StdEncoding.DecodeString(string(run.clientFinal[i+3:]))
					if err != nil {
						t.Fatal(err)
					}
					proof[0] ^= 1
					return append(run.clientFinal[:i+3:i+3], base64.StdEncoding.EncodeToString(proof)...)
				},
				want:    ErrAuthenticationFailed,
				wantMsg: "e=invalid-proof",
			},
			{
				name: "short-proof", user: "alice", pass: "alice-secret",
				tamper: func(run scramRun) []byte {
					i := bytes.LastIndex(run.clientFinal, []byte(",p="))
					return append(run.clientFinal[:i:i], ",p=AAAA"...)
				},
				want:    ErrAuthenticationFailed,
				wantMsg: "e=invalid-proof",
			},
			{
				name: "empty-proof", user: "alice", pass: "alice-secret",
				tamper: func(run scramRun) []byte {
					i := bytes.LastIndex(run.clientFinal, []byte(",p="))
					return run.clientFinal[:i+3]
				},
				want:    ErrAuthenticationFailed,
				wantMsg: "e=invalid-proof",
			},
			{
				name: "channel-binding-y", user: "alice", pass: "alice-secret",
				tamper: func(run scramRun) []byte {
					return bytes.Replace(run.clientFinal, []byte("c=biws"), []byte("c=eSws"), 1)
				},
				want:    ErrAuthenticationFailed,
				wantMsg: "e=channel-bindings-dont-match",
			},
			{
				name: "garbage", user: "alice", pass: "alice-secret",
				tamper:  func(scramRun) []byte { return []byte("c=biws") },
				want:    ErrMalformed,
				wantMsg: "e=invalid-encoding",
			},
			{
				name: "wrong-password", user: "alice", pass: "not-alice-secret",
				tamper:  func(run scramRun) []byte { return run.clientFinal },
				want:    ErrAuthenticationFailed,
				wantMsg: "e=invalid-proof",
			},
			{
				name: "unknown-user", user: "mallory", pass: "alice-secret",
				tamper:  func(run scramRun) []byte { return run.clientFinal },
				want:    ErrAuthenticationFailed,
				wantMsg: "e=invalid-proof",
			},
		} {
			t.Run(mechanism+"/"+tc.name, func(t *testing.T) {
				run := startScram(t, mechanism, tc.user, tc.pass, lookup)
				out, done, err := run.server.Step(tc.tamper(run))
				if done || !errors.Is(err, tc.want) {
					t.Fatalf("done %v, err %v, want %v", done, err, tc.want)
				}
				checkKafkaCode(t, err)
				if string(out) != tc.wantMsg {
					t.Fatalf("server message %q, want %q", out, tc.wantMsg)
				}
				if err := run.clientFinishesServer(out); err == nil {
					t.Fatal("the client accepted a failure")
				}
				if run.server.Username() != "" {
					t.Fatalf("failed, yet user %q", run.server.Username())
				}
				checkEnded(t, run.server)
			})
		}
	}
}

// An unknown user's exchange looks like a known user's with a wrong
// password: a salt of the usual shape, the same one every time, and the
// same failure.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	mechanism := config.MechanismSCRAMSHA256
	lookup := credentials(t, mechanism, map[string]string{"alice": "alice-secret"})
	salt := func(run scramRun) (salt []byte, iterations string) {
		attrs := strings.Split(string(run.serverFirst), ",")
		if len(attrs) != 3 {
			t.Fatalf("server-first %q", run.serverFirst)
		}
		salt, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(attrs[1], "s="))
		if err != nil {
			t.Fatal(err)
		}
		return salt, attrs[2]
	}
	key := WithDecoyKey([]byte("cluster secret"))
	first := startScram(t, mechanism, "mallory", "x", lookup, key)
	again := startScram(t, mechanism, "mallory", "y", lookup, key)
	other := startScram(t, mechanism, "trudy", "x", lookup, key)
	keyless := startScram(t, mechanism, "mallory", "x", lookup)
	otherKey := startScram(t, mechanism, "mallory", "x", lookup, WithDecoyKey([]byte("another secret")))
	known := startScram(t, mechanism, "alice", "wrong", lookup, key)

	s1, i1 := salt(first)
	s2, i2 := salt(again)
	if !bytes.Equal(s1, s2) || i1 != i2 {
		t.Fatalf("decoy differs between conversations: %x %s, %x %s", s1, i1, s2, i2)
	}
	if len(s1) != decoySaltLen || i1 != "i=4096" {
		t.Fatalf("decoy shape: %d-byte salt, %s", len(s1), i1)
	}
	for name, run := range map[string]scramRun{"other user": other, "no key": keyless, "other key": otherKey} {
		if s, _ := salt(run); bytes.Equal(s, s1) {
			t.Fatalf("%s: same decoy salt", name)
		}
	}
	// franz-go's client nonces are all the same length.
	if len(first.serverFirst) != len(known.serverFirst) {
		t.Fatalf("server-first lengths differ: %q, %q", first.serverFirst, known.serverFirst)
	}

	outUnknown, _, errUnknown := first.server.Step(first.clientFinal)
	outKnown, _, errKnown := known.server.Step(known.clientFinal)
	if errUnknown == nil || errKnown == nil || errUnknown.Error() != errKnown.Error() || !bytes.Equal(outUnknown, outKnown) {
		t.Fatalf("unknown user: %q, %v; wrong password: %q, %v", outUnknown, errUnknown, outKnown, errKnown)
	}
}

// Malformed or refused client-first messages: an error, no server message.
func TestScramClientFirst(t *testing.T) {
	lookup := credentials(t, config.MechanismSCRAMSHA256, map[string]string{"user": "pencil", "a,b": "x", "a=b": "x"})
	for _, tc := range []struct {
		msg  string
		want error // nil: accepted
	}{
		{"n,,n=user,r=abc", nil},
		{"n,a=user,n=user,r=abc", nil},
		{"n,,n=a=2Cb,r=abc", nil},
		{"n,,n=a=3Db,r=abc", nil},
		{"n,,n=user,r=abc,ext=value", nil},
		{"n,,n=user,r=abc,tokenauth=false", nil},
		{"n,,n=nobody,r=abc", nil}, // a decoy
		{"", ErrMalformed},
		{"n", ErrMalformed},
		{"n,", ErrMalformed},
		{"n,,", ErrMalformed},
		{"n,,n=user", ErrMalformed},
		{"n,,n=user,", ErrMalformed},
		{"n,,n=user,r=", ErrMalformed},
		{"n,,n=user,r=a b", ErrMalformed},
		{"n,,n=user,r=abc,", ErrMalformed},
		{"n,,n=user,r=abc,=x", ErrMalformed},
		{"n,,n=user,r=abc,x=", ErrMalformed},
		{"n,,n=user,r=abc,x", ErrMalformed},
		{"n,,n=user,r=abc,r=def", ErrMalformed},
		{"n,,n=user,r=abc,ext1=x", ErrMalformed},
		{"n,,n=user,r=abc,x=\x00", ErrMalformed},
		{"n,,n=,r=abc", ErrMalformed},
		{"n,,n=us=er,r=abc", ErrMalformed},
		{"n,,n=us=2cer,r=abc", ErrMalformed},
		{"n,,n=user=,r=abc", ErrMalformed},
		{"n,,n=us\x00er,r=abc", ErrMalformed},
		{"n,,n=\xff,r=abc", ErrMalformed},
		{"n,,r=abc,n=user", ErrMalformed},
		{"n,,user,r=abc", ErrMalformed},
		{"x,,n=user,r=abc", ErrMalformed},
		{"N,,n=user,r=abc", ErrMalformed},
		{"n,b=user,n=user,r=abc", ErrMalformed},
		{"n,a=,n=user,r=abc", ErrMalformed},
		{"n,a=us=er,n=user,r=abc", ErrMalformed},
		{"y,,n=user,r=abc", ErrUnsupported},
		{"p=tls-unique,,n=user,r=abc", ErrUnsupported},
		{"n,,m=ext,n=user,r=abc", ErrUnsupported},
		{"n,,n=user,r=abc,tokenauth=true", ErrUnsupported},
		{"n,,n=user,r=abc,tokenauth=TRUE", ErrUnsupported},
		{"n,a=other,n=user,r=abc", ErrAuthenticationFailed},
		{"n,a=a=2Cb,n=a=3Db,r=abc", ErrAuthenticationFailed},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			s, err := NewScramServer(config.MechanismSCRAMSHA256, lookup, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, done, err := s.Step([]byte(tc.msg))
			if done {
				t.Fatal("done after client-first")
			}
			if tc.want == nil {
				if err != nil || !strings.HasPrefix(string(out), "r=abc") {
					t.Fatalf("%q, %v", out, err)
				}
				return
			}
			if !errors.Is(err, tc.want) || out != nil {
				t.Fatalf("%q, %v; want %v", out, err, tc.want)
			}
			checkKafkaCode(t, err)
			checkEnded(t, s)
		})
	}
}

// Malformed client-final messages, after a good client-first.
func TestScramClientFinalMalformed(t *testing.T) {
	lookup := credentials(t, config.MechanismSCRAMSHA256, map[string]string{"user": "pencil"})
	for _, msg := range []string{
		"",
		",",
		"p=AAAA",
		"c=biws,p=AAAA",
		"c=biws,r=abc",
		"c=biws,r=abc,p=A",
		"c=biws,r=abc,p=AAA",
		"c=biws,r=abc,p=AA\nAA",
		"c=biws,r=abc,p=AA==AA==",
		"c=biws,r=abc,p=AAAA,x=y",
		"c=biws,r=,p=AAAA",
		"c=biws,r=a b,p=AAAA",
		"c=biws,r=abc,=x,p=AAAA",
		"c=biws,r=abc,s=x,p=AAAA",
		"r=abc,c=biws,p=AAAA",
		"biws,r=abc,p=AAAA",
	} {
		t.Run(msg, func(t *testing.T) {
			s, err := NewScramServer(config.MechanismSCRAMSHA256, lookup, nil)
			if err != nil {
				t.Fatal(err)
			}
			step(t, s, "n,,n=user,r=abc")
			out, done, err := s.Step([]byte(msg))
			if done || !errors.Is(err, ErrMalformed) || string(out) != "e=invalid-encoding" {
				t.Fatalf("%q, done %v, %v", out, done, err)
			}
			checkEnded(t, s)
		})
	}
}

// A credential the lookup hands back that the mechanism can't use fails
// the exchange at once: the broker's fault, reported as such.
func TestScramUnusableCredential(t *testing.T) {
	good, err := scram.NewCredential(config.MechanismSCRAMSHA256, "pencil", []byte(testSalt), scram.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*scram.Credential)
	}{
		{"other-mechanism", func(c *scram.Credential) { c.Mechanism = config.MechanismSCRAMSHA512 }},
		{"no-mechanism", func(c *scram.Credential) { c.Mechanism = "" }},
		{"few-iterations", func(c *scram.Credential) { c.Iterations = scram.MinIterations - 1 }},
		{"many-iterations", func(c *scram.Credential) { c.Iterations = scram.MaxIterations + 1 }},
		{"no-salt", func(c *scram.Credential) { c.Salt = nil }},
		{"short-stored-key", func(c *scram.Credential) { c.StoredKey = c.StoredKey[:16] }},
		{"no-server-key", func(c *scram.Credential) { c.ServerKey = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mutate(&c)
			s, err := NewScramServer(config.MechanismSCRAMSHA256, func(string) (scram.Credential, bool) { return c, true }, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Step([]byte("n,,n=user,r=abc")); !errors.Is(err, scram.ErrInvalidCredential) {
				t.Fatalf("got %v", err)
			} else {
				checkKafkaCode(t, err)
			}
			checkEnded(t, s)
		})
	}
}

func TestNewScramServerMechanism(t *testing.T) {
	for _, m := range []string{"", config.MechanismPlain, "SCRAM-SHA-1", "scram-sha-256", "SCRAM-SHA-256-PLUS"} {
		if _, err := NewScramServer(m, nil, nil); !errors.Is(err, scram.ErrUnknownMechanism) {
			t.Fatalf("%q: %v", m, err)
		}
	}
	// A nil lookup knows no one: the exchange still runs, against a decoy.
	s, err := NewScramServer(config.MechanismSCRAMSHA512, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := step(t, s, "n,,n=user,r=abc"); !strings.HasPrefix(out, "r=abc") {
		t.Fatalf("server-first %q", out)
	}
}

// The server's nonce comes from printable bytes of its source only.
func TestServerNonce(t *testing.T) {
	src := strings.Repeat("\x00,a\xff~ ", 40)
	got, err := serverNonce(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("a~", serverNonceLen/2); got != want {
		t.Fatalf("nonce %q, want %q", got, want)
	}
	if _, err := serverNonce(bytes.NewReader(make([]byte, 1<<20))); err == nil {
		t.Fatal("a source of zeros gave a nonce")
	}
	if _, err := serverNonce(strings.NewReader("short")); err == nil {
		t.Fatal("a short source gave a nonce")
	}
	s, err := NewScramServer(config.MechanismSCRAMSHA256, nil, strings.NewReader("short"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Step([]byte("n,,n=user,r=abc")); err == nil {
		t.Fatal("stepped without a nonce")
	}
	checkEnded(t, s)
}

func TestDecodeSaslname(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"user", "user", true},
		{"a=2Cb", "a,b", true},
		{"a=3Db", "a=b", true},
		{"=2C=3D=3D=2C", ",==,", true},
		{"=3D2C", "=2C", true},
		{"ünï", "ünï", true},
		{"", "", false},
		{"=", "", false},
		{"a=2", "", false},
		{"a=2c", "", false},
		{"a=3d", "", false},
		{"a=41", "", false},
		{"a,b", "", false},
		{"a\x00b", "", false},
		{"\xc3", "", false},
	} {
		got, err := decodeSaslname(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("decodeSaslname(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
