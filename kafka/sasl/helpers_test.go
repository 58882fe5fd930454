package sasl

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/weir-broker/weir/broker/scram"
)

// testSalt is a fixed salt for test credentials.
const testSalt = "weir test salt, 24 bytes"

// credentials is a lookup over users' passwords, derived once per test.
func credentials(t testing.TB, mechanism string, passwords map[string]string) func(string) (scram.Credential, bool) {
	t.Helper()
	creds := map[string]scram.Credential{}
	for user, pass := range passwords {
		c, err := scram.NewCredential(mechanism, pass, []byte(testSalt), scram.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds[user] = c
	}
	return func(user string) (scram.Credential, bool) {
		c, ok := creds[user]
		return c, ok
	}
}

// exchange runs client against server until one of them fails or both are
// done; serverErr is the server's error, clientErr the client's.
func exchange(t *testing.T, client kgosasl.Mechanism, server Server) (serverErr, clientErr error) {
	t.Helper()
	if client.Name() != server.Mechanism() {
		t.Fatalf("client %s, server %s", client.Name(), server.Mechanism())
	}
	session, msg, err := client.Authenticate(context.Background(), "weir:9092")
	if err != nil {
		t.Fatalf("client start: %v", err)
	}
	for range 4 {
		out, done, err := server.Step(msg)
		if err != nil {
			return err, nil
		}
		clientDone, next, err := session.Challenge(out)
		if err != nil {
			return nil, err
		}
		if done {
			if !clientDone {
				t.Fatal("server done, client not")
			}
			return nil, nil
		}
		if clientDone {
			t.Fatal("client done, server not")
		}
		msg = next
	}
	t.Fatal("exchange does not end")
	return nil, nil
}

// step runs one server step that must succeed.
func step(t *testing.T, s Server, msg string) string {
	t.Helper()
	out, _, err := s.Step([]byte(msg))
	if err != nil {
		t.Fatalf("step %q: %v", msg, err)
	}
	return string(out)
}

// checkEnded asserts that s is over: another step is an illegal state.
func checkEnded(t testing.TB, s Server) {
	t.Helper()
	if _, done, err := s.Step([]byte("n,,n=user,r=abc")); done || !errors.Is(err, ErrIllegalState) {
		t.Fatalf("step after the end: done %v, err %v", done, err)
	}
}

// checkKafkaCode asserts that err carries a Kafka error code.
func checkKafkaCode(t testing.TB, err error) {
	t.Helper()
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		t.Fatalf("%v carries no Kafka error code", err)
	}
}
