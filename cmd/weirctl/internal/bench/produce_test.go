package bench

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestBenchProduceFlagValidation(t *testing.T) {
	// All of these fail locally, before any broker is dialed.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"rf without partitions", []string{"--replication-factor", "3"}, "give --partitions too"},
		{"zero rf", []string{"-p", "3", "--replication-factor", "0"}, "--replication-factor must be positive or -1"},
		{"negative rf", []string{"-p", "3", "-r", "-2"}, "--replication-factor must be positive or -1"},
		{"bad acks", []string{"-p", "3", "-r", "3", "--acks", "2"}, "--acks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--brokers", "127.0.0.1:1", "--timeout", "200ms", "bench", "produce", "x", "--records", "1"}, tc.args...)
			_, _, err := benchtest.Run(t, newProduceCommand, "", args...)
			clitest.WantErrContains(t, err, tc.want)
		})
	}
}

func TestBenchProduceOptionDefaults(t *testing.T) {
	cmd := newProduceCommand(&cli.Options{})
	for flag, want := range map[string]string{"replication-factor": "-1", "acks": "-1", "partitions": "0"} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s default: got %s, want %s", flag, got, want)
		}
	}
	acks, err := cli.ParseAcks("-1")
	if err != nil || acks != kgo.AllISRAcks() {
		t.Errorf("default acks: %v, %v", acks, err)
	}
}
