package cli

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/weir-broker/weir/config/tlstest"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestSASLOptions(t *testing.T) {
	for _, tc := range []struct {
		mechanism, want string
	}{
		{"PLAIN", "PLAIN"},
		{"scram-sha-256", "SCRAM-SHA-256"},
		{" SCRAM-SHA-512", "SCRAM-SHA-512"},
	} {
		s := kafkaSecurity{saslMechanism: tc.mechanism, saslUser: "alice", saslPassword: "secret"}
		mech, err := s.saslMechanismOpt()
		if err != nil || mech == nil || mech.Name() != tc.want {
			t.Errorf("%q: %v %v", tc.mechanism, mech, err)
		}
		if opts, err := s.clientOpts(); err != nil || len(opts) != 1 {
			t.Errorf("%q: %d options, %v", tc.mechanism, len(opts), err)
		}
	}
	if opts, err := (&kafkaSecurity{}).clientOpts(); err != nil || len(opts) != 0 {
		t.Fatalf("no flags: %d options, %v", len(opts), err)
	}
	for _, tc := range []struct {
		name string
		s    kafkaSecurity
		want string
	}{
		{"user without mechanism", kafkaSecurity{saslUser: "alice", saslPassword: "x"}, "needs --sasl-mechanism"},
		{"mechanism without user", kafkaSecurity{saslMechanism: "PLAIN", saslPassword: "x"}, "needs --sasl-user"},
		{"mechanism without password", kafkaSecurity{saslMechanism: "PLAIN", saslUser: "alice"}, "needs --sasl-password"},
		{"unknown mechanism", kafkaSecurity{saslMechanism: "GSSAPI", saslUser: "alice", saslPassword: "x"}, `got "GSSAPI"`},
		{"cert without key", kafkaSecurity{tlsCert: "c.pem"}, "--tls-cert and --tls-key go together"},
		{"missing CA", kafkaSecurity{tls: true, tlsCA: filepath.Join(t.TempDir(), "nope.pem")}, "--tls-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.s.clientOpts()
			clitest.WantErrContains(t, err, tc.want)
		})
	}
}

func TestSASLFromEnvironment(t *testing.T) {
	t.Setenv(saslMechanismEnv, "SCRAM-SHA-512")
	t.Setenv(saslUserEnv, " envuser ")
	t.Setenv(saslPasswordEnv, "envpass")
	newFlags := func(args ...string) (*kafkaSecurity, *pflag.FlagSet) {
		s := &kafkaSecurity{}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.StringVar(&s.saslMechanism, "sasl-mechanism", "", "")
		fs.StringVar(&s.saslUser, "sasl-user", "", "")
		fs.StringVar(&s.saslPassword, "sasl-password", "", "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return s, fs
	}
	s, fs := newFlags()
	s.fromEnvironment(fs)
	if s.saslMechanism != "SCRAM-SHA-512" || s.saslUser != "envuser" || s.saslPassword != "envpass" {
		t.Fatalf("from the environment: %q %q %q", s.saslMechanism, s.saslUser, s.saslPassword)
	}
	s, fs = newFlags("--sasl-mechanism", "PLAIN", "--sasl-user", "flaguser", "--sasl-password", "flagpass")
	s.fromEnvironment(fs)
	if s.saslMechanism != "PLAIN" || s.saslUser != "flaguser" || s.saslPassword != "flagpass" {
		t.Fatalf("flags must win: %q %q %q", s.saslMechanism, s.saslUser, s.saslPassword)
	}
	// Through the command tree: the environment's user with no mechanism
	// is refused before anything connects.
	t.Setenv(saslMechanismEnv, "")
	_, _, err := clitest.Run(t, func(out io.Writer) *cobra.Command {
		root := &cobra.Command{Use: "weirctl", SilenceUsage: true, SilenceErrors: true}
		root.SetOut(out)
		AddGlobalFlags(root, nil)
		root.AddCommand(&cobra.Command{Use: "list", RunE: func(*cobra.Command, []string) error {
			t.Error("a command ran with a SASL user but no mechanism")
			return nil
		}})
		return root
	}, "", "--brokers", "127.0.0.1:1", "list")
	clitest.WantErrContains(t, err, "needs --sasl-mechanism")
}

func TestTLSOptions(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "weirctl test CA")
	caFile := ca.WriteCertFile(t, dir)
	cert, key := ca.Client(t, pkix.Name{CommonName: "weirctl-test"}).WriteFiles(t, dir, "client")
	if cfg, err := (&kafkaSecurity{}).tlsConfig(); cfg != nil || err != nil {
		t.Fatalf("no TLS flags: %v %v", cfg, err)
	}
	cfg, err := (&kafkaSecurity{tls: true}).tlsConfig()
	if err != nil || cfg == nil || cfg.RootCAs != nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("--tls: %+v %v", cfg, err)
	}
	// --tls-ca and --tls-cert imply --tls.
	cfg, err = (&kafkaSecurity{tlsCA: caFile, tlsCert: cert, tlsKey: key}).tlsConfig()
	if err != nil || cfg == nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("CA and client certificate: %+v %v", cfg, err)
	}
	opts, err := (&kafkaSecurity{saslMechanism: "SCRAM-SHA-256", saslUser: "a", saslPassword: "b", tlsCA: caFile}).clientOpts()
	if err != nil || len(opts) != 2 {
		t.Fatalf("SASL over TLS: %d options, %v", len(opts), err)
	}
	if _, err := (&kafkaSecurity{tlsCA: key}).tlsConfig(); err == nil {
		t.Fatal("a key file was taken for a CA")
	}
	if _, err := (&kafkaSecurity{tlsCert: cert, tlsKey: cert}).tlsConfig(); err == nil {
		t.Fatal("a certificate was taken for a key")
	}
}
