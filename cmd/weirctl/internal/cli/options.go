package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	defaultBrokers = "127.0.0.1:9092"
	// BrokersEnv fills in --brokers when the flag is not given.
	BrokersEnv = "WEIR_BROKERS"
)

// Options is shared by every subcommand. It is created per command
// tree, never as a package variable, so in-process tests can run many trees
// side by side without state leaking between them.
type Options struct {
	brokers []string
	Format  string
	Timeout time.Duration
	// security holds the SASL and TLS flags (security.go);
	// securityOpts is what they become once checked.
	security     kafkaSecurity
	securityOpts []kgo.Opt
}

// AddGlobalFlags registers the global flags on root, for it and every
// subcommand, and checks them before any subcommand runs but those that
// exempt (when not nil) lets through unchecked. The options it returns
// are filled in by then.
func AddGlobalFlags(root *cobra.Command, exempt func(*cobra.Command) bool) *Options {
	g := &Options{}
	var brokers string
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if exempt != nil && exempt(cmd) {
			return nil
		}
		// The environment only fills in what the user did not say
		// explicitly, so a flag always wins over WEIR_BROKERS.
		if !cmd.Flags().Changed("brokers") {
			if env, ok := os.LookupEnv(BrokersEnv); ok && strings.TrimSpace(env) != "" {
				brokers = env
			}
		}
		g.security.fromEnvironment(cmd.Flags())
		return g.finish(brokers)
	}

	pf := root.PersistentFlags()
	pf.StringVar(&brokers, "brokers", defaultBrokers, "comma-separated seed brokers (env "+BrokersEnv+")")
	pf.StringVar(&g.Format, "format", FormatTable, "output format: table, json or yaml (produce and consume stream one JSON\nobject per line, or one YAML document per record opened by ---)")
	pf.DurationVar(&g.Timeout, "timeout", 10*time.Second, "timeout for each admin call, record delivery, and bench stalls")
	addKafkaSecurityFlags(root, &g.security)
	return g
}

// finish validates global flags once, before any command touches the network,
// so a typo fails fast instead of surfacing as a connection timeout.
func (g *Options) finish(brokers string) error {
	list, err := parseBrokers(brokers)
	if err != nil {
		return err
	}
	g.brokers = list
	if err := validateFormat(g.Format); err != nil {
		return err
	}
	if g.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", g.Timeout)
	}
	g.securityOpts, err = g.security.clientOpts()
	return err
}

func parseBrokers(s string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(s, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		if !strings.Contains(b, ":") {
			return nil, fmt.Errorf("broker %q: missing port (want host:port)", b)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("no brokers given")
	}
	return out, nil
}

// clientOpts are the options every command shares. Bounding dials and
// retries by --timeout is what turns "broker is down" into a prompt error
// instead of franz-go's default of retrying for a very long time.
func (g *Options) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(g.brokers...),
		kgo.DialTimeout(g.Timeout),
		kgo.RetryTimeout(g.Timeout),
		kgo.ClientID("weirctl"),
	}
	opts = append(opts, g.securityOpts...)
	return append(opts, extra...)
}

// NewClient is the one way commands get a Kafka client, so that the
// global flags apply to every one of them.
func (g *Options) NewClient(extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(g.clientOpts(extra...)...)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return cl, nil
}

// DescribeCallErr adds which brokers were tried when a call failed because
// the deadline passed, since a bare "context deadline exceeded" does not
// tell the user that nothing answered.
func (g *Options) DescribeCallErr(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer from %s within %s: %w", what, strings.Join(g.brokers, ","), g.Timeout, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// WithAdmin runs fn with an admin client whose context and server-side
// timeouts both come from --timeout, so the broker gives up on e.g. a slow
// CreateTopics at the same moment the CLI would.
func (g *Options) WithAdmin(ctx context.Context, fn func(context.Context, *kadm.Client) error) error {
	cl, err := g.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(g.Timeout.Milliseconds()))
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	return fn(ctx, adm)
}
