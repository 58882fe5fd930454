package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.yaml.in/yaml/v3"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

// TestACLUserFlagValidation: every local mistake is refused with a clear
// message before any network call. The brokers point at a closed port, so
// an error that got as far as the network would name it instead.
func TestACLUserFlagValidation(t *testing.T) {
	offline := []string{"--brokers", "127.0.0.1:1", "--timeout", "2s"}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"create without password", "", []string{"acl", "user", "create", "alice"}, "missing password: use --password P or --password-file F"},
		{"create with both passwords", "", []string{"acl", "user", "create", "alice", "--password", "x", "--password-file", "-"}, "not both"},
		{"create with empty password", "", []string{"acl", "user", "create", "alice", "--password", ""}, "--password must not be empty"},
		{"create with empty password file", "", []string{"acl", "user", "create", "alice", "--password-file", ""}, "--password-file needs a path"},
		{"create with empty stdin", "", []string{"acl", "user", "create", "alice", "--password-file", "-"}, "the password from stdin is empty"},
		{"create with blank first line", "\nsecret\n", []string{"acl", "user", "create", "alice", "--password-file", "-"}, "the password from stdin is empty"},
		{"create with missing file", "", []string{"acl", "user", "create", "alice", "--password-file", filepath.Join(t.TempDir(), "nope")}, "reading the password"},
		{"create with too few iterations", "", []string{"acl", "user", "create", "alice", "--password", "x", "--iterations", "100"}, "--iterations must be between 4096 and 16384 (Kafka's SCRAM limits), got 100"},
		{"create with too many iterations", "", []string{"acl", "user", "create", "alice", "--password", "x", "--iterations", "16385"}, "got 16385"},
		{"create with bad mechanism", "", []string{"acl", "user", "create", "alice", "--password", "x", "--mechanism", "SCRAM-SHA-1"}, `--mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, got "SCRAM-SHA-1"`},
		{"create with empty user", "", []string{"acl", "user", "create", "", "--password", "x"}, "the user name must not be empty"},
		{"create without user", "", []string{"acl", "user", "create", "--password", "x"}, "accepts 1 arg(s)"},
		{"create with two users", "", []string{"acl", "user", "create", "a", "b", "--password", "x"}, "accepts 1 arg(s)"},
		{"delete with bad mechanism", "", []string{"acl", "user", "delete", "alice", "--mechanism", "plain"}, "--mechanism must be"},
		{"delete with empty mechanism", "", []string{"acl", "user", "delete", "alice", "--mechanism", ""}, "--mechanism must be"},
		{"delete with empty user", "", []string{"acl", "user", "delete", ""}, "the user name must not be empty"},
		{"list with empty user", "", []string{"acl", "user", "list", "alice", ""}, "the user name must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, _, err := run(t, tc.stdin, append(offline, tc.args...)...)
			clitest.WantErrContains(t, err, tc.want)
			if strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Fatalf("the check reached the network: %v", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("a local check took %v", d)
			}
		})
	}
}

func TestParseScramMechanism(t *testing.T) {
	for in, want := range map[string]kadm.ScramMechanism{
		"SCRAM-SHA-256":   kadm.ScramSha256,
		"scram-sha-512":   kadm.ScramSha512,
		" SCRAM-SHA-512 ": kadm.ScramSha512,
	} {
		got, err := parseScramMechanism(in)
		if err != nil || got != want {
			t.Errorf("%q: got %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "SHA-256", "SCRAM-SHA-1", "PLAIN"} {
		if _, err := parseScramMechanism(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	if got := mechanismName(3); got != "UNKNOWN(3)" {
		t.Errorf("mechanismName(3) = %q", got)
	}
}

func TestReadPasswordFile(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"s3cret\n", "s3cret"},
		{"s3cret\r\n", "s3cret"},
		{"s3cret", "s3cret"},
		{"  spaced pass \nsecond line\n", "  spaced pass "},
	} {
		got, err := readPasswordFile(strings.NewReader(tc.in), "-")
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "is empty"},
		{"\n", "is empty"},
		{"\r\nsecond\n", "is empty"},
		{strings.Repeat("x", maxPasswordLine+1), "longer than"},
	} {
		_, err := readPasswordFile(strings.NewReader(tc.in), "-")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.20q: got %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	// A line of exactly the limit is still a password.
	long := strings.Repeat("y", maxPasswordLine)
	if got, err := readPasswordFile(strings.NewReader(long+"\n"), "-"); err != nil || got != long {
		t.Errorf("a %d-byte line: %v", maxPasswordLine, err)
	}

	path := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(path, []byte("from-file\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The file wins over stdin, which must not be read.
	if got, err := readPasswordFile(strings.NewReader("from-stdin\n"), path); err != nil || got != "from-file" {
		t.Errorf("file: got %q, %v", got, err)
	}
}

func TestPrintUserList(t *testing.T) {
	notFound := kadm.DescribedUserSCRAM{User: "carol", Err: kerr.ResourceNotFound, ErrMessage: "RESOURCE_NOT_FOUND: attempt to describe nonexistent SCRAM credentials for user carol"}
	described := kadm.DescribedUserSCRAMs{
		"bob": {User: "bob", CredInfos: []kadm.CredInfo{{Mechanism: kadm.ScramSha512, Iterations: 4096}}},
		"alice": {User: "alice", CredInfos: []kadm.CredInfo{
			{Mechanism: kadm.ScramSha512, Iterations: 8192},
			{Mechanism: kadm.ScramSha256, Iterations: 4096},
		}},
	}

	var out bytes.Buffer
	if err := printUserList(&out, cli.FormatTable, nil, described); err != nil {
		t.Fatal(err)
	}
	want := "USER   MECHANISM      ITERATIONS\n" +
		"alice  SCRAM-SHA-256  4096\n" +
		"alice  SCRAM-SHA-512  8192\n" +
		"bob    SCRAM-SHA-512  4096\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}

	wantCreds := []userCredential{
		{"alice", "SCRAM-SHA-256", 4096},
		{"alice", "SCRAM-SHA-512", 8192},
		{"bob", "SCRAM-SHA-512", 4096},
	}
	out.Reset()
	if err := printUserList(&out, cli.FormatJSON, nil, described); err != nil {
		t.Fatal(err)
	}
	var gotJSON []userCredential
	if err := json.Unmarshal(out.Bytes(), &gotJSON); err != nil || !equalCreds(gotJSON, wantCreds) {
		t.Errorf("json: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `"iterations": 8192`) {
		t.Errorf("json keys:\n%s", out.String())
	}
	out.Reset()
	if err := printUserList(&out, cli.FormatYAML, nil, described); err != nil {
		t.Fatal(err)
	}
	var gotYAML []userCredential
	var raw []map[string]any
	if err := yaml.Unmarshal(out.Bytes(), &raw); err != nil || len(raw) != 3 || raw[1]["user"] != "alice" || raw[1]["mechanism"] != "SCRAM-SHA-512" || raw[1]["iterations"] != 8192 {
		t.Errorf("yaml: %v\n%s", err, out.String())
	}
	for _, m := range raw {
		gotYAML = append(gotYAML, userCredential{m["user"].(string), m["mechanism"].(string), int32(m["iterations"].(int))})
	}
	if !equalCreds(gotYAML, wantCreds) {
		t.Errorf("yaml: %v", gotYAML)
	}

	// Nobody at all: an empty list, not null.
	out.Reset()
	if err := printUserList(&out, cli.FormatJSON, nil, kadm.DescribedUserSCRAMs{}); err != nil || strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("empty: %v %q", err, out.String())
	}

	// A named user without credentials: the others are printed, the
	// missing one fails the command in words and by its code; a user the
	// broker skipped is reported too.
	described["carol"] = notFound
	out.Reset()
	err := printUserList(&out, cli.FormatTable, []string{"bob", "carol", "dave"}, described)
	clitest.WantErrContains(t, err, "user carol has no SCRAM credentials (RESOURCE_NOT_FOUND)")
	clitest.WantErrContains(t, err, "user dave: broker did not answer")
	if !strings.Contains(out.String(), "bob") || strings.Contains(out.String(), "carol") {
		t.Errorf("table with a missing user:\n%s", out.String())
	}
	// Any other per-user error keeps its code and the broker's message.
	other := kadm.DescribedUserSCRAMs{"eve": {User: "eve", Err: kerr.ClusterAuthorizationFailed, ErrMessage: "not allowed"}}
	clitest.WantErrContains(t, printUserList(&out, cli.FormatJSON, []string{"eve"}, other), "user eve: CLUSTER_AUTHORIZATION_FAILED: not allowed")
}

func equalCreds(a, b []userCredential) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPrintUserResults(t *testing.T) {
	var out bytes.Buffer
	ok := []userResult{{User: "alice", Mechanism: "SCRAM-SHA-256", Iterations: 8192}}
	if err := printUserResults(&out, cli.FormatTable, "create", ok); err != nil {
		t.Fatal(err)
	}
	want := "USER   MECHANISM      ITERATIONS  STATUS\n" +
		"alice  SCRAM-SHA-256  8192        OK\n"
	if out.String() != want {
		t.Errorf("create table:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if err := printUserResults(&out, cli.FormatJSON, "create", ok); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 || got[0]["user"] != "alice" ||
		got[0]["mechanism"] != "SCRAM-SHA-256" || got[0]["iterations"] != 8192.0 || got[0]["error"] != nil {
		t.Errorf("create json: %v\n%s", err, out.String())
	}

	// delete: one row per mechanism, no iterations column; a missing
	// credential is said in words.
	gone := []userResult{
		{User: "bob", Mechanism: "SCRAM-SHA-512", Error: "RESOURCE_NOT_FOUND", ErrorMessage: "attempt to delete a user credential that does not exist"},
	}
	out.Reset()
	err := printUserResults(&out, cli.FormatTable, "delete", gone)
	clitest.WantErrContains(t, err, "user bob has no SCRAM-SHA-512 credential to delete (RESOURCE_NOT_FOUND)")
	want = "USER  MECHANISM      STATUS\n" +
		"bob   SCRAM-SHA-512  RESOURCE_NOT_FOUND: attempt to delete a user credential that does not exist\n"
	if out.String() != want {
		t.Errorf("delete table:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	refused := []userResult{{User: "alice", Mechanism: "SCRAM-SHA-256", Iterations: 4096, Error: "UNACCEPTABLE_CREDENTIAL", ErrorMessage: "salt must not be empty"}}
	err = printUserResults(&out, cli.FormatYAML, "create", refused)
	clitest.WantErrContains(t, err, "create SCRAM-SHA-256 credential of user alice: UNACCEPTABLE_CREDENTIAL: salt must not be empty")
	var doc []map[string]any
	if yerr := yaml.Unmarshal(out.Bytes(), &doc); yerr != nil || len(doc) != 1 || doc[0]["error"] != "UNACCEPTABLE_CREDENTIAL" {
		t.Errorf("create yaml: %v\n%s", yerr, out.String())
	}
}

func TestAlterOutcome(t *testing.T) {
	resps := kadm.AlteredUserSCRAMs{
		"alice": {User: "alice"},
		"bob":   {User: "bob", Err: kerr.ResourceNotFound, ErrMessage: "RESOURCE_NOT_FOUND: attempt to delete a user credential that does not exist"},
	}
	if n, d := alterOutcome("alice", resps); n != "" || d != "" {
		t.Errorf("alice: %q %q", n, d)
	}
	if n, d := alterOutcome("bob", resps); n != "RESOURCE_NOT_FOUND" || d != "attempt to delete a user credential that does not exist" {
		t.Errorf("bob: %q %q", n, d)
	}
	if n, _ := alterOutcome("carol", resps); n != "MISSING_RESPONSE" {
		t.Errorf("carol: %q", n)
	}
}

func TestUserMechanisms(t *testing.T) {
	described := kadm.DescribedUserSCRAMs{
		"alice": {User: "alice", CredInfos: []kadm.CredInfo{{Mechanism: kadm.ScramSha512}, {Mechanism: kadm.ScramSha256}}},
		"bob":   {User: "bob", Err: kerr.ResourceNotFound},
		"odd":   {User: "odd", CredInfos: []kadm.CredInfo{{Mechanism: 7}}},
		"none":  {User: "none"},
	}
	got, err := userMechanisms("alice", described)
	if err != nil || len(got) != 2 || got[0] != kadm.ScramSha256 || got[1] != kadm.ScramSha512 {
		t.Errorf("alice: %v %v", got, err)
	}
	_, err = userMechanisms("bob", described)
	clitest.WantErrContains(t, err, "user bob has no SCRAM credentials to delete (RESOURCE_NOT_FOUND)")
	_, err = userMechanisms("none", described)
	clitest.WantErrContains(t, err, "RESOURCE_NOT_FOUND")
	_, err = userMechanisms("odd", described)
	clitest.WantErrContains(t, err, "UNKNOWN(7)")
	_, err = userMechanisms("ghost", described)
	clitest.WantErrContains(t, err, "did not answer")
}

func TestMechanismFlagCompletion(t *testing.T) {
	t.Setenv(cli.BrokersEnv, "no-port")
	for _, args := range [][]string{
		{"__complete", "acl", "user", "create", "alice", "--mechanism", ""},
		{"__complete", "acl", "user", "delete", "alice", "--mechanism", ""},
	} {
		out, _, err := run(t, "", args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || lines[0] != "SCRAM-SHA-256" || lines[1] != "SCRAM-SHA-512" || !strings.HasPrefix(lines[2], ":") {
			t.Errorf("%v: got %q", args, out)
		}
	}
}

func TestACLUserHelp(t *testing.T) {
	out, _, err := run(t, "", "acl", "user", "create", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replaced", "upsert", "--password-file", "--iterations", "SCRAM-SHA-512"} {
		if !strings.Contains(out, want) {
			t.Errorf("create help lacks %q:\n%s", want, out)
		}
	}
}
