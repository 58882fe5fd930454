package integration

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// wcUserCred is one line of `weirctl acl user list --format json`, and
// wcUserResult one credential of `acl user create|delete --format json`.
type (
	wcUserCred struct {
		User       string `json:"user"`
		Mechanism  string `json:"mechanism"`
		Iterations int32  `json:"iterations"`
	}
	wcUserResult struct {
		User       string `json:"user"`
		Mechanism  string `json:"mechanism"`
		Iterations int32  `json:"iterations"`
		Error      string `json:"error"`
	}
)

// TestScramUsers: weirctl acl user create|list|delete against one broker —
// both mechanisms, a password from stdin, the upsert replacing a password
// and its iterations, a deleted user reported as having none, a bad
// --iterations refused before any call — with every listing checked against
// the broker's own DescribeUserScramCredentials answer through kadm, and
// the credentials still there after a restart on the same data directory.
func TestScramUsers(t *testing.T) {
	b := StartBroker(t)
	w := newWeirctl(t, b)

	list := func(users ...string) []wcUserCred {
		t.Helper()
		args := append([]string{"acl", "user", "list", "--format", "json"}, users...)
		return decodeJSON[[]wcUserCred](t, w.ok(t, "", args...))
	}
	// brokerCreds is the broker's answer through kadm, in list's shape
	// and order.
	brokerCreds := func(adm *kadm.Client) []wcUserCred {
		t.Helper()
		described, err := adm.DescribeUserSCRAMs(ctxTimeout(t, requestTimeout))
		if err != nil {
			t.Fatalf("DescribeUserSCRAMs: %v", err)
		}
		var out []wcUserCred
		for _, d := range described.Sorted() {
			if d.Err != nil {
				t.Fatalf("DescribeUserSCRAMs: %s: %v", d.User, d.Err)
			}
			for _, c := range d.CredInfos {
				out = append(out, wcUserCred{d.User, c.Mechanism.String(), c.Iterations})
			}
		}
		slices.SortFunc(out, func(a, b wcUserCred) int {
			return strings.Compare(a.User+" "+a.Mechanism, b.User+" "+b.Mechanism)
		})
		return out
	}
	same := func(what string, got, want []wcUserCred) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	adm := b.Admin(t)

	// alice with the defaults, bob with SCRAM-SHA-512 and a password read
	// from stdin (its trailing newline is not part of it).
	r := w.ok(t, "", "acl", "user", "create", "alice", "--password", "alice-pw")
	if !strings.Contains(r.stdout, "alice") || !strings.Contains(r.stdout, "SCRAM-SHA-256") {
		t.Fatalf("create alice printed:\n%s", r)
	}
	created := decodeJSON[[]wcUserResult](t, w.ok(t, "bob-pw\n", "acl", "user", "create", "bob",
		"--password-file", "-", "--mechanism", "SCRAM-SHA-512", "--format", "json"))
	if len(created) != 1 || created[0] != (wcUserResult{User: "bob", Mechanism: "SCRAM-SHA-512", Iterations: 4096}) {
		t.Fatalf("create bob: %+v", created)
	}

	want := []wcUserCred{{"alice", "SCRAM-SHA-256", 4096}, {"bob", "SCRAM-SHA-512", 4096}}
	same("list", list(), want)
	same("broker", brokerCreds(adm), want)
	table := w.ok(t, "", "acl", "user", "list").stdout
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "USER MECHANISM ITERATIONS" ||
		strings.Join(strings.Fields(lines[1]), " ") != "alice SCRAM-SHA-256 4096" ||
		strings.Join(strings.Fields(lines[2]), " ") != "bob SCRAM-SHA-512 4096" {
		t.Fatalf("list table:\n%s", table)
	}

	// Creating alice's mechanism again replaces it.
	w.ok(t, "", "acl", "user", "create", "alice", "--password", "alice-pw-2", "--iterations", "8192")
	want = []wcUserCred{{"alice", "SCRAM-SHA-256", 8192}, {"bob", "SCRAM-SHA-512", 4096}}
	same("list after re-creating alice", list(), want)
	same("list alice", list("alice"), want[:1])
	same("broker after re-creating alice", brokerCreds(adm), want)

	// Deleting bob without --mechanism removes every credential he has;
	// afterwards he has none, which list and delete both report.
	deleted := decodeJSON[[]wcUserResult](t, w.ok(t, "", "acl", "user", "delete", "bob", "--format", "json"))
	if len(deleted) != 1 || deleted[0] != (wcUserResult{User: "bob", Mechanism: "SCRAM-SHA-512"}) {
		t.Fatalf("delete bob: %+v", deleted)
	}
	r = w.fails(t, "RESOURCE_NOT_FOUND", "acl", "user", "list", "bob")
	if !strings.Contains(r.stderr, "user bob has no SCRAM credentials") {
		t.Fatalf("list bob:\n%s", r)
	}
	w.fails(t, "user bob has no SCRAM credentials to delete (RESOURCE_NOT_FOUND)", "acl", "user", "delete", "bob")
	w.fails(t, "user bob has no SCRAM-SHA-256 credential to delete (RESOURCE_NOT_FOUND)", "acl", "user", "delete", "bob", "--mechanism", "SCRAM-SHA-256")
	described, err := adm.DescribeUserSCRAMs(ctxTimeout(t, requestTimeout), "bob")
	if err != nil || !errors.Is(described["bob"].Err, kerr.ResourceNotFound) {
		t.Fatalf("broker on bob: %+v, %v", described, err)
	}
	want = want[:1]
	same("list after deleting bob", list(), want)
	same("broker after deleting bob", brokerCreds(adm), want)

	// A bad --iterations is refused before any call: pointed at a closed
	// port (the later --brokers wins), the answer is still the local one,
	// and nothing reached the broker.
	r = w.fails(t, "--iterations must be between 4096 and 16384", "acl", "user", "create", "carol",
		"--password", "carol-pw", "--iterations", "100", "--brokers", "127.0.0.1:1")
	if strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Fatalf("the iterations check reached the network:\n%s", r)
	}
	w.fails(t, "--iterations must be between 4096 and 16384", "acl", "user", "create", "carol",
		"--password", "carol-pw", "--iterations", "100")
	same("broker after refused carol", brokerCreds(adm), want)

	// The credential lives in the controller's state: a restart on the
	// same data directory keeps it.
	b.Restart(t)
	same("list after restart", list(), want)
	same("broker after restart", brokerCreds(b.Admin(t)), want)
}
