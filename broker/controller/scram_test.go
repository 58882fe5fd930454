package controller

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/scram"
	"github.com/weir-broker/weir/config"
)

func testScramCredential(user, mechanism string) ScramCredential {
	n := 32 // an unknown mechanism's keys: any length
	if h, ok := scram.Hash(mechanism); ok {
		n = h().Size()
	}
	return ScramCredential{User: user, Credential: scram.Credential{Mechanism: mechanism, Iterations: 4096, Salt: []byte("salt-" + user),
		StoredKey: bytes.Repeat([]byte{1}, n), ServerKey: bytes.Repeat([]byte{2}, n)}}
}

func TestAlterScramCredentials(t *testing.T) {
	h := newHarness(t)
	alice256, alice512, bob := testScramCredential("alice", config.MechanismSCRAMSHA256), testScramCredential("alice", config.MechanismSCRAMSHA512), testScramCredential("bob", config.MechanismSCRAMSHA256)
	h.ok(AlterScramCredentials{Upsertions: []ScramCredential{alice256, alice512, bob}})
	v := h.s.View()
	if got, ok := v.ScramCredential("alice", config.MechanismSCRAMSHA512); !ok || !bytes.Equal(got.StoredKey, alice512.StoredKey) {
		t.Fatalf("alice's SCRAM-SHA-512 credential: %+v %v", got, ok)
	}
	if n := len(v.ScramCredentials()); n != 3 {
		t.Fatalf("%d credentials, want 3", n)
	}

	// An upsertion replaces; a deletion removes one mechanism, and the
	// user goes once none is left. The old view does not change.
	changed := alice256
	changed.Iterations = 8192
	h.ok(AlterScramCredentials{Deletions: []ScramCredentialKey{{User: "bob", Mechanism: config.MechanismSCRAMSHA256}}, Upsertions: []ScramCredential{changed}})
	if got, _ := h.s.View().ScramCredential("alice", config.MechanismSCRAMSHA256); got.Iterations != 8192 {
		t.Fatalf("after the upsertion: %d iterations", got.Iterations)
	}
	if _, ok := h.s.View().ScramCredential("bob", config.MechanismSCRAMSHA256); ok {
		t.Fatal("bob's deleted credential is still there")
	}
	if _, ok := v.ScramCredential("bob", config.MechanismSCRAMSHA256); !ok {
		t.Fatal("a published view changed")
	}

	// Refusals change nothing.
	h.fails(AlterScramCredentials{Deletions: []ScramCredentialKey{{User: "carol", Mechanism: config.MechanismSCRAMSHA256}}}, kerr.ResourceNotFound)
	bad := testScramCredential("dave", config.MechanismSCRAMSHA256)
	bad.Iterations = 1000
	h.fails(AlterScramCredentials{Upsertions: []ScramCredential{testScramCredential("erin", config.MechanismSCRAMSHA256), bad}}, kerr.UnacceptableCredential)
	bad = testScramCredential("dave", "SCRAM-SHA-1")
	h.fails(AlterScramCredentials{Upsertions: []ScramCredential{bad}}, kerr.UnsupportedSaslMechanism)
	bad = testScramCredential("dave", config.MechanismSCRAMSHA512)
	bad.StoredKey = bad.StoredKey[:32]
	h.fails(AlterScramCredentials{Upsertions: []ScramCredential{bad}}, kerr.UnacceptableCredential)
	if _, ok := h.s.View().ScramCredential("erin", config.MechanismSCRAMSHA256); ok {
		t.Fatal("a refused batch stored part of itself")
	}

	// Credentials survive a snapshot and restore.
	snap, err := h.s.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	restored := New(testOptions())
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if got, ok := restored.View().ScramCredential("alice", config.MechanismSCRAMSHA512); !ok || !bytes.Equal(got.ServerKey, alice512.ServerKey) || got.Iterations != 4096 {
		t.Fatalf("restored credential: %+v %v", got, ok)
	}
	again, _ := restored.SnapshotBytes()
	if !bytes.Equal(again, snap) {
		t.Fatal("the restored state snapshots differently")
	}
}

// A credential's JSON, which the controller's log and snapshots hold,
// keeps its field names and order with the credential math in its own
// package.
func TestScramCredentialJSON(t *testing.T) {
	c := ScramCredential{User: "u", Credential: scram.Credential{Mechanism: config.MechanismSCRAMSHA256, Iterations: 4096,
		Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("v")}}
	got, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"user":"u","mechanism":"SCRAM-SHA-256","iterations":4096,"salt":"cw==","stored_key":"aw==","server_key":"dg=="}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
