package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/kafka/sasl"
)

// TestScramCredentialAPIs drives DescribeUserScramCredentials and
// AlterUserScramCredentials with kadm (as Kafka's admin tools do) and with
// raw requests for what kadm refuses client-side.
func TestScramCredentialAPIs(t *testing.T) {
	_, b, addr := startServer(t)
	cl := loopbackClient(t, addr)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("upserting: %v %v", err, altered.Error())
	}
	// Stored: salt, iterations and the derived keys, never the password.
	cred, ok := b.ScramCredential("alice", config.MechanismSCRAMSHA512)
	if !ok || cred.Iterations != 8192 || len(cred.StoredKey) != 64 || len(cred.Salt) == 0 {
		t.Fatalf("alice's SCRAM-SHA-512 credential: %+v %v", cred, ok)
	}

	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(described) != 2 || len(described["alice"].CredInfos) != 2 || described["bob"].CredInfos[0].Iterations != 4096 {
		t.Fatalf("described all users: %+v", described)
	}
	described, err = adm.DescribeUserSCRAMs(ctx, "bob", "carol")
	if err != nil {
		t.Fatal(err)
	}
	if described["bob"].Err != nil || !errors.Is(described["carol"].Err, kerr.ResourceNotFound) {
		t.Fatalf("bob %v, carol %v (want RESOURCE_NOT_FOUND)", described["bob"].Err, described["carol"].Err)
	}

	// A user named twice in a describe.
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range []string{"alice", "alice"} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		dreq.Users = append(dreq.Users, u)
	}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Results) != 1 || dresp.Results[0].ErrorCode != kerr.DuplicateResource.Code {
		t.Fatalf("alice twice: %+v", dresp.Results)
	}

	// Per-user refusals; the other users' changes still apply.
	areq := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	upsert := func(name string, mech int8, iterations int32, salt, salted []byte) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iterations, salt, salted
		areq.Upsertions = append(areq.Upsertions, u)
	}
	salted := make([]byte, 32)
	upsert("dave", 3, 4096, []byte("s"), salted)   // unknown mechanism
	upsert("erin", 1, 1000, []byte("s"), salted)   // too few iterations
	upsert("frank", 1, 20000, []byte("s"), salted) // too many
	upsert("gina", 1, 4096, nil, salted)           // no salt
	upsert("hal", 1, 4096, []byte("s"), salted)    // twice
	upsert("hal", 1, 4096, []byte("s"), salted)
	upsert("ivy", 1, 4096, []byte("s"), salted) // fine
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "bob", 1 // bob has no SCRAM-SHA-256
	areq.Deletions = append(areq.Deletions, del)
	del.Name, del.Mechanism = "alice", 2
	areq.Deletions = append(areq.Deletions, del)
	aresp, err := areq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{
		"bob": kerr.ResourceNotFound.Code, "alice": 0,
		"dave": kerr.UnsupportedSaslMechanism.Code, "erin": kerr.UnacceptableCredential.Code,
		"frank": kerr.UnacceptableCredential.Code, "gina": kerr.UnacceptableCredential.Code,
		"hal": kerr.DuplicateResource.Code, "ivy": 0,
	}
	if len(aresp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(aresp.Results), len(want), aresp.Results)
	}
	for _, r := range aresp.Results {
		if code, ok := want[r.User]; !ok || r.ErrorCode != code {
			t.Errorf("user %s: error %d, want %d", r.User, r.ErrorCode, code)
		}
	}
	if _, ok := b.ScramCredential("alice", config.MechanismSCRAMSHA512); ok {
		t.Error("alice's deleted SCRAM-SHA-512 credential is still there")
	}
	if _, ok := b.ScramCredential("ivy", config.MechanismSCRAMSHA256); !ok {
		t.Error("ivy's valid upsertion was not applied beside the refused ones")
	}
	for _, user := range []string{"dave", "erin", "frank", "gina", "hal"} {
		for _, mech := range []string{config.MechanismSCRAMSHA256, config.MechanismSCRAMSHA512} {
			if _, ok := b.ScramCredential(user, mech); ok {
				t.Errorf("refused user %s has a %s credential", user, mech)
			}
		}
	}
}

// TestStoredScramCredentialsAuthenticate: a password set through
// AlterUserScramCredentials (kadm salts it client-side) authenticates
// with franz-go's SCRAM client against the SASL server reading the stored
// credential, for both mechanisms; a wrong password does not.
func TestStoredScramCredentialsAuthenticate(t *testing.T) {
	s, _, addr := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	altered, err := kadm.NewClient(loopbackClient(t, addr)).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("upserting: %v %v", err, altered.Error())
	}
	for _, tc := range []struct {
		mechanism string
		client    func(scram.Auth) kgosasl.Mechanism
	}{
		{config.MechanismSCRAMSHA256, func(a scram.Auth) kgosasl.Mechanism { return a.AsSha256Mechanism() }},
		{config.MechanismSCRAMSHA512, func(a scram.Auth) kgosasl.Mechanism { return a.AsSha512Mechanism() }},
	} {
		for password, wantOK := range map[string]bool{"alice-secret": true, "wrong": false} {
			srv, err := sasl.NewScramServer(tc.mechanism, s.scramLookup(tc.mechanism), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = runSASL(tc.client(scram.Auth{User: "alice", Pass: password}), srv)
			if (err == nil) != wantOK {
				t.Fatalf("%s with password %q: %v (want success %v)", tc.mechanism, password, err, wantOK)
			}
			if wantOK && srv.Username() != "alice" {
				t.Fatalf("%s: authenticated as %q", tc.mechanism, srv.Username())
			}
		}
	}
}

// runSASL runs a client mechanism against a server conversation.
func runSASL(client kgosasl.Mechanism, server sasl.Server) error {
	session, msg, err := client.Authenticate(context.Background(), "weir:9092")
	if err != nil {
		return err
	}
	for range 4 {
		out, done, err := server.Step(msg)
		if err != nil {
			return err
		}
		clientDone, next, err := session.Challenge(out)
		if err != nil {
			return err
		}
		if done && clientDone {
			return nil
		}
		msg = next
	}
	return errors.New("the exchange did not finish")
}
