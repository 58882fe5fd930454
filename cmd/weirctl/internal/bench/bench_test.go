package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

func TestBenchAgainstDeadBrokerFailsFast(t *testing.T) {
	for _, tc := range []struct {
		newCmd func(*cli.Options) *cobra.Command
		args   []string
	}{
		{newProduceCommand, []string{"bench", "produce", "t", "--records", "10"}},
		{newProduceCommand, []string{"bench", "produce", "t", "--records", "10", "--partitions", "3"}},
		{newConsumeCommand, []string{"bench", "consume", "t", "--records", "10"}},
	} {
		args := tc.args
		start := time.Now()
		_, _, err := benchtest.Run(t, tc.newCmd, "", append([]string{"--brokers", "127.0.0.1:1", "--timeout", "500ms"}, args...)...)
		if err == nil {
			t.Errorf("%v: want error", args)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%v: took %s", args, el)
		}
	}
}

func TestBenchCommandFlagValidation(t *testing.T) {
	b := []string{"--brokers", "127.0.0.1:1"}
	for _, tc := range []struct {
		newCmd func(*cli.Options) *cobra.Command
		args   []string
		want   string
	}{
		{newProduceCommand, []string{"bench", "produce", "t"}, "records"},
		{newProduceCommand, []string{"bench", "produce", "t", "--records", "0"}, "--records"},
		{newProduceCommand, []string{"bench", "produce", "t", "--records", "5", "--record-size", "-1"}, "--record-size"},
		{newProduceCommand, []string{"bench", "produce", "t", "--records", "5", "--compression", "xz"}, "--compression"},
		{newConsumeCommand, []string{"bench", "consume", "t", "--records", "5", "--consumers", "0"}, "--consumers"},
		{newConsumeCommand, []string{"bench", "consume", "t", "--records", "5", "-o", "nope"}, "--offset"},
	} {
		_, _, err := benchtest.Run(t, tc.newCmd, "", append(b, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want error mentioning %q, got %v", tc.args, tc.want, err)
		}
	}
}
