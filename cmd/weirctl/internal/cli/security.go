package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// How weirctl's Kafka client reaches a secured listener: SASL (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512) and TLS, as global flags so that every
// command that speaks the Kafka protocol shares them.

const (
	saslMechanismEnv = "WEIR_SASL_MECHANISM"
	saslUserEnv      = "WEIR_SASL_USER"
	saslPasswordEnv  = "WEIR_SASL_PASSWORD"
)

// saslMechanismNames lists --sasl-mechanism's values, as Kafka spells them.
func saslMechanismNames() []string { return []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} }

// kafkaSecurity holds the connection flags.
type kafkaSecurity struct {
	saslMechanism, saslUser, saslPassword string
	tls                                   bool
	tlsCA, tlsCert, tlsKey                string
}

// addKafkaSecurityFlags registers the flags on root for every command.
func addKafkaSecurityFlags(root *cobra.Command, s *kafkaSecurity) {
	pf := root.PersistentFlags()
	pf.StringVar(&s.saslMechanism, "sasl-mechanism", "", "SASL mechanism for the Kafka listener: "+strings.Join(saslMechanismNames(), ", ")+" (env "+saslMechanismEnv+")")
	pf.StringVar(&s.saslUser, "sasl-user", "", "SASL user (env "+saslUserEnv+")")
	pf.StringVar(&s.saslPassword, "sasl-password", "", "SASL password (env "+saslPasswordEnv+", which keeps it out of the process list)")
	pf.BoolVar(&s.tls, "tls", false, "connect to the Kafka listener over TLS (implied by --tls-ca and --tls-cert)")
	pf.StringVar(&s.tlsCA, "tls-ca", "", "PEM CA file to verify the brokers' certificates with (default: the system's)")
	pf.StringVar(&s.tlsCert, "tls-cert", "", "PEM client certificate, for listeners that authenticate clients")
	pf.StringVar(&s.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	_ = root.RegisterFlagCompletionFunc("sasl-mechanism", cobra.FixedCompletions(saslMechanismNames(), cobra.ShellCompDirectiveNoFileComp))
}

// fromEnvironment fills the mechanism, user and password from the
// environment where the flags did not set them: a flag always wins.
func (s *kafkaSecurity) fromEnvironment(flags *pflag.FlagSet) {
	if !flags.Changed("sasl-mechanism") {
		if v, ok := os.LookupEnv(saslMechanismEnv); ok {
			s.saslMechanism = strings.TrimSpace(v)
		}
	}
	if !flags.Changed("sasl-user") {
		if v, ok := os.LookupEnv(saslUserEnv); ok {
			s.saslUser = strings.TrimSpace(v)
		}
	}
	if !flags.Changed("sasl-password") {
		if v, ok := os.LookupEnv(saslPasswordEnv); ok {
			s.saslPassword = v
		}
	}
}

// clientOpts checks that the flags go together and returns the client
// options they stand for; none when no flag was given.
func (s *kafkaSecurity) clientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	mech, err := s.saslMechanismOpt()
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	cfg, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

func (s *kafkaSecurity) saslMechanismOpt() (sasl.Mechanism, error) {
	if s.saslMechanism == "" {
		if s.saslUser != "" || s.saslPassword != "" {
			return nil, fmt.Errorf("a SASL user or password needs --sasl-mechanism (%s)", strings.Join(saslMechanismNames(), ", "))
		}
		return nil, nil
	}
	switch {
	case s.saslUser == "":
		return nil, fmt.Errorf("--sasl-mechanism needs --sasl-user (or %s)", saslUserEnv)
	case s.saslPassword == "":
		return nil, fmt.Errorf("--sasl-mechanism needs --sasl-password (or %s)", saslPasswordEnv)
	}
	switch strings.ToUpper(strings.TrimSpace(s.saslMechanism)) {
	case "PLAIN":
		return plain.Auth{User: s.saslUser, Pass: s.saslPassword}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.saslUser, Pass: s.saslPassword}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.saslUser, Pass: s.saslPassword}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("--sasl-mechanism must be %s, got %q", strings.Join(saslMechanismNames(), ", "), s.saslMechanism)
}

// tlsConfig is nil without TLS. The files are read here, before any
// connection, so a wrong path fails at once and says which flag it was.
func (s *kafkaSecurity) tlsConfig() (*tls.Config, error) {
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if !s.tls && s.tlsCA == "" && s.tlsCert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", s.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if s.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
