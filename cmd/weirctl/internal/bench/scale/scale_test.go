package scale

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestBenchScaleFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "scale", "create", "t", "-p", "0"}, "--partitions must be >= 1"},
		{[]string{"bench", "scale", "create", "t", "-p", "10", "-r", "0"}, "--replication-factor must be >= 1"},
		{[]string{"bench", "scale", "create", "t", "-p", "10", "--interval", "1ms"}, "--interval must be at least"},
		{[]string{"bench", "scale", "create", "t", "-p", "10", "--create-timeout", "1000h"}, "--create-timeout must be positive and fit"},
		{[]string{"bench", "scale", "wait", "--until", "gone"}, "--until must be settled, moved or out"},
		{[]string{"bench", "scale", "wait", "--until", "moved"}, "--until moved needs --broker"},
		{[]string{"bench", "scale", "wait", "--until", "out"}, "--until out needs --broker"},
		{[]string{"bench", "scale", "wait", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"bench", "scale", "sample", "--pids", "1,x", "--data-dirs", "a,b"}, `"x" is not a process id`},
		{[]string{"bench", "scale", "sample", "--pids", "1,2", "--data-dirs", "a"}, "--data-dirs names 1 directories for 2 processes"},
		{[]string{"bench", "scale", "sample", "--pids", "1,2", "--data-dirs", "a,b", "--metrics-urls", "u"}, "--metrics-urls names 1 URLs for 2 processes"},
		{[]string{"bench", "scale", "report", "/nonexistent-bench-scale"}, "is this a bench-scale output directory?"},
	} {
		_, _, err := benchtest.Run(t, NewCommand, "", tc.args...)
		clitest.WantErrContains(t, err, tc.want)
	}
}

func TestScaleSampleOptionsParse(t *testing.T) {
	var o scaleSampleOptions
	// An empty metrics entry keeps its place: that broker is not scraped.
	if err := o.parse(" 11, 12 ,13", "a,b,c", "http://x/metrics,,http://z/metrics"); err != nil {
		t.Fatal(err)
	}
	if len(o.pids) != 3 || o.pids[1] != 12 || o.dataDirs[2] != "c" || o.metricURLs[1] != "" || o.metricURLs[2] != "http://z/metrics" {
		t.Fatalf("parsed %+v", o)
	}
	if err := o.parse("1", "a", ""); err != nil || o.metricURLs != nil {
		t.Fatalf("no metrics: %v, %v", err, o.metricURLs)
	}
}

func TestScaleWaitSince(t *testing.T) {
	// --since-unix-ms dates the event; a wait whose bound is already
	// spent still polls once (against nothing here) and reports, rather
	// than hanging or failing.
	since := time.Now().Add(-time.Hour).UnixMilli()
	out, _, err := benchtest.Run(t, NewCommand, "", "--brokers", "127.0.0.1:1", "--timeout", "200ms", "--format", "json",
		"bench", "scale", "wait", "--until", "moved", "--broker", "1", "--timeout", "1s", "--since-unix-ms", strconv.FormatInt(since, 10))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"met": false`, `"seconds": null`, `"polls": 1`, `"poll_errors": 1`, `"broker": 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}
