package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func msList(vals ...int) []time.Duration {
	out := make([]time.Duration, len(vals))
	for i, v := range vals {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestPercentilesOneToHundred(t *testing.T) {
	d := make([]time.Duration, 0, 100)
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	rand.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
	p := computePercentiles(d)
	if p.p50 != 50*time.Millisecond || p.p95 != 95*time.Millisecond || p.p99 != 99*time.Millisecond || p.p999 != 100*time.Millisecond || p.max != 100*time.Millisecond {
		t.Errorf("got %+v", p)
	}
}

func TestPercentileP999(t *testing.T) {
	d := make([]time.Duration, 0, 2000)
	for i := 1; i <= 2000; i++ {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	rand.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
	p := computePercentiles(d)
	// Nearest rank: ceil(0.999*2000) = 1998.
	if p.p99 != 1980*time.Microsecond || p.p999 != 1998*time.Microsecond || p.max != 2000*time.Microsecond {
		t.Errorf("got %+v", p)
	}
	s := newSummary("produce", "t", 2000, 2000, 0, time.Second, d)
	if s.P999Ms != 1.998 {
		t.Errorf("summary p99.9: %v", s.P999Ms)
	}
}

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
			_, _, err := run(t, "", args...)
			wantErrContains(t, err, tc.want)
		})
	}
}

func TestBenchProduceOptionDefaults(t *testing.T) {
	cmd := newBenchProduceCommand(&globalOptions{})
	for flag, want := range map[string]string{"replication-factor": "-1", "acks": "-1", "partitions": "0"} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s default: got %s, want %s", flag, got, want)
		}
	}
	acks, err := parseAcks("-1")
	if err != nil || acks != kgo.AllISRAcks() {
		t.Errorf("default acks: %v, %v", acks, err)
	}
}

func TestPercentilesNearestRank(t *testing.T) {
	for _, tc := range []struct {
		in                  []time.Duration
		p50, p95, p99, pmax int
	}{
		{msList(7), 7, 7, 7, 7},
		{msList(1, 2), 1, 2, 2, 2},
		{msList(5, 1, 3), 3, 5, 5, 5},
		// A single outlier among 200 samples shows up at max, not p99.
		{append(slices.Repeat(msList(1), 199), 1000*time.Millisecond), 1, 1, 1, 1000},
	} {
		p := computePercentiles(tc.in)
		got := []time.Duration{p.p50, p.p95, p.p99, p.max}
		want := msList(tc.p50, tc.p95, tc.p99, tc.pmax)
		if !slices.Equal(got, want) {
			t.Errorf("%d samples: got %v, want %v", len(tc.in), got, want)
		}
	}
	if p := computePercentiles(nil); p != (percentiles{}) {
		t.Errorf("empty: %+v", p)
	}
}

func TestAssignPartitions(t *testing.T) {
	for _, tc := range []struct {
		parts     []int32
		consumers int
		want      string
	}{
		{[]int32{0, 1, 2, 3, 4}, 2, "[[0 2 4] [1 3]]"},
		{[]int32{0, 1}, 5, "[[0] [1]]"},
		{[]int32{0, 1, 2}, 1, "[[0 1 2]]"},
	} {
		if got := fmt.Sprint(assignPartitions(tc.parts, tc.consumers)); got != tc.want {
			t.Errorf("%v over %d: got %s, want %s", tc.parts, tc.consumers, got, tc.want)
		}
	}
}

func TestStopReason(t *testing.T) {
	bg := context.Background()
	mk := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(bg)
		if cause != nil {
			cancel(cause)
		} else {
			t.Cleanup(func() { cancel(nil) })
		}
		return ctx
	}
	for _, tc := range []struct {
		cause   error
		want    string
		wantErr bool
	}{
		{nil, stopRecords, false},
		{errBenchDone, stopRecords, false},
		{context.DeadlineExceeded, stopDuration, false},
		{fmt.Errorf("%w: quiet", errStall), stopStalled, true},
		{errors.New("NOT_LEADER_FOR_PARTITION"), stopFailed, true},
	} {
		got, err := stopReason(bg, mk(tc.cause))
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("cause %v: got %s, %v", tc.cause, got, err)
		}
	}
	parent, cancel := context.WithCancel(bg)
	cancel()
	if got, err := stopReason(parent, parent); got != stopInterrupted || err == nil {
		t.Errorf("interrupt: got %s, %v", got, err)
	}
}

func TestMonitorCancelsOnStall(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r := &benchRun{target: 10, cancel: cancel, started: time.Now()}
	var out strings.Builder
	done := make(chan struct{})
	go func() { r.monitor(ctx, &out, "t", time.Second); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("monitor did not stop a stalled run")
	}
	if !errors.Is(context.Cause(ctx), errStall) {
		t.Errorf("cause: %v", context.Cause(ctx))
	}
	if !strings.Contains(out.String(), "0/10 records") {
		t.Errorf("progress line missing: %q", out.String())
	}
}

func TestInOrderReleasesSequentially(t *testing.T) {
	var got []int
	o := newInOrder(func(r produceResult) { got = append(got, r.Line) })
	for _, i := range []int{2, 0, 3, 1, 4} {
		o.done(i, produceResult{Line: i})
	}
	if fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("got %v", got)
	}
}

func TestReadLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"a\nb\n", []string{"a", "b"}},
		{"a\r\nb", []string{"a", "b"}},
		{"a\n\nc\n", []string{"a", "", "c"}},
		{"", nil},
		{"\n", []string{""}},
	} {
		lines := make(chan []byte, 10)
		errc := make(chan error, 1)
		readLines(context.Background(), strings.NewReader(tc.in), lines, errc)
		var got []string
		for l := range lines {
			got = append(got, string(l))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestReadLinesLongLine(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	lines := make(chan []byte, 2)
	readLines(context.Background(), strings.NewReader(long+"\nshort\n"), lines, make(chan error, 1))
	if l := <-lines; len(l) != 1<<20 {
		t.Errorf("long line: got %d bytes", len(l))
	}
	if l := <-lines; string(l) != "short" {
		t.Errorf("got %q", l)
	}
}
