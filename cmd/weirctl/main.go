package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	defaultBrokers = "127.0.0.1:9092"
	brokersEnv     = "WEIR_BROKERS"
)

func main() {
	// A signal cancels the context rather than killing the process so that
	// consumers commit what they printed and bench still prints a summary.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand(os.Stdout).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "weirctl:", err)
		os.Exit(1)
	}
}

// globalOptions is shared by every subcommand. It is created per command
// tree, never as a package variable, so in-process tests can run many trees
// side by side without state leaking between them.
type globalOptions struct {
	brokers []string
	format  string
	timeout time.Duration
	// security holds the SASL and TLS flags (kafka_security.go);
	// securityOpts is what they become once checked.
	security     kafkaSecurity
	securityOpts []kgo.Opt
}

// newRootCommand builds the whole command tree. Output goes to out; tests
// swap stdin and stderr with SetIn/SetErr on the returned command.
func newRootCommand(out io.Writer) *cobra.Command {
	g := &globalOptions{}
	var brokers string

	root := &cobra.Command{
		Use:   "weirctl",
		Short: "Administer and exercise a weir (Kafka-compatible) cluster",
		Long: "weirctl manages topics, produces and consumes records, and benchmarks\n" +
			"a weir cluster over the Kafka protocol.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if isCompletionCommand(cmd) {
				return nil
			}
			// The environment only fills in what the user did not say
			// explicitly, so a flag always wins over WEIR_BROKERS.
			if !cmd.Flags().Changed("brokers") {
				if env, ok := os.LookupEnv(brokersEnv); ok && strings.TrimSpace(env) != "" {
					brokers = env
				}
			}
			g.security.fromEnvironment(cmd.Flags())
			return g.finish(brokers)
		},
	}
	root.SetOut(out)

	pf := root.PersistentFlags()
	pf.StringVar(&brokers, "brokers", defaultBrokers, "comma-separated seed brokers (env "+brokersEnv+")")
	pf.StringVar(&g.format, "format", formatTable, "output format: table, json or yaml (produce and consume stream one JSON\nobject per line, or one YAML document per record opened by ---)")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "timeout for each admin call, record delivery, and bench stalls")
	addKafkaSecurityFlags(root, &g.security)

	root.AddCommand(
		newTopicCommand(g),
		newGroupCommand(g),
		newClusterCommand(g),
		newACLCommand(g),
		newProduceCommand(g),
		newConsumeCommand(g),
		newBenchCommand(g),
	)
	if err := addCompletion(root); err != nil {
		// Only a renamed flag gets here, which every test run would catch.
		panic(err)
	}
	return root
}

// finish validates global flags once, before any command touches the network,
// so a typo fails fast instead of surfacing as a connection timeout.
func (g *globalOptions) finish(brokers string) error {
	list, err := parseBrokers(brokers)
	if err != nil {
		return err
	}
	g.brokers = list
	if err := validateFormat(g.format); err != nil {
		return err
	}
	if g.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", g.timeout)
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
func (g *globalOptions) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(g.brokers...),
		kgo.DialTimeout(g.timeout),
		kgo.RetryTimeout(g.timeout),
		kgo.ClientID("weirctl"),
	}
	opts = append(opts, g.securityOpts...)
	return append(opts, extra...)
}

func (g *globalOptions) newClient(extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(g.clientOpts(extra...)...)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return cl, nil
}

// describeCallErr adds which brokers were tried when a call failed because
// the deadline passed, since a bare "context deadline exceeded" does not
// tell the user that nothing answered.
func (g *globalOptions) describeCallErr(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer from %s within %s: %w", what, strings.Join(g.brokers, ","), g.timeout, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
