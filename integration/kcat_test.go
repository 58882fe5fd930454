package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatBinary returns kcat (or kafkacat) from PATH, or skips the test.
func kcatBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"kcat", "kafkacat"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("kcat not found on PATH (install it with .ci/test-deps.sh or apt-get install kcat); skipping the librdkafka interoperability tests")
	return ""
}

// runKcat runs kcat with args and stdin, bounded by timeout, and returns
// stdout; it fails the test on a non-zero exit.
func runKcat(t *testing.T, bin string, stdin []byte, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s timed out after %v\nstderr:\n%s", strings.Join(args, " "), timeout, stderr.String())
	}
	if err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// kcatConsume reads a topic from the beginning to the end with kcat -C -e
// and returns lines "partition|offset|key|value".
func kcatConsume(t *testing.T, bin string, b *Broker, topic string) []string {
	t.Helper()
	out := runKcat(t, bin, nil, 60*time.Second,
		"-b", b.KafkaAddr, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%p|%o|%k|%s\n")
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func TestKcatInterop(t *testing.T) {
	bin := kcatBinary(t)
	b := StartBroker(t)
	if out := runKcat(t, bin, nil, 30*time.Second, "-V"); out != "" {
		t.Logf("%s", strings.SplitN(out, "\n", 2)[0])
	}

	t.Run("metadata", func(t *testing.T) {
		CreateTopic(t, b, "kcat-meta", 3, nil)
		out := runKcat(t, bin, nil, 30*time.Second, "-b", b.KafkaAddr, "-L", "-t", "kcat-meta")
		if !strings.Contains(out, `topic "kcat-meta" with 3 partitions`) {
			t.Errorf("kcat -L output does not show kcat-meta with 3 partitions:\n%s", out)
		}
	})

	for _, codec := range []string{"none", "lz4"} {
		t.Run("kcat produce "+codec+", both consume", func(t *testing.T) {
			topic := "kcat-in-" + codec
			CreateTopic(t, b, topic, 2, nil)
			const n = 200
			var in bytes.Buffer
			want := map[string]string{}
			for i := range n {
				k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("value-%03d-%s", i, strings.Repeat("z", 40))
				fmt.Fprintf(&in, "%s:%s\n", k, v)
				want[k] = v
			}
			runKcat(t, bin, in.Bytes(), 60*time.Second,
				"-b", b.KafkaAddr, "-P", "-t", topic, "-K", ":", "-z", codec, "-X", "acks=all")

			// franz-go reads what librdkafka wrote.
			got := consumeN(t, b, n, 30*time.Second, []string{topic})
			seen := map[string]bool{}
			for _, r := range got {
				k := string(r.Key)
				if want[k] != string(r.Value) {
					t.Errorf("franz-go read %s=%q, want %q", k, r.Value, want[k])
				}
				if seen[k] {
					t.Errorf("franz-go read key %s twice", k)
				}
				seen[k] = true
			}
			// Same key, same partition (librdkafka's partitioner).
			part := map[string]int32{}
			for _, r := range got {
				part[string(r.Key)] = r.Partition
			}

			// kcat reads it back too.
			lines := kcatConsume(t, bin, b, topic)
			if len(lines) != n {
				t.Fatalf("kcat -C read %d records, want %d:\n%s", len(lines), n, strings.Join(lines[:min(len(lines), 20)], "\n"))
			}
			for _, l := range lines {
				f := strings.SplitN(l, "|", 4)
				if len(f) != 4 {
					t.Fatalf("kcat line %q", l)
				}
				if want[f[2]] != f[3] {
					t.Errorf("kcat read %s=%q, want %q", f[2], f[3], want[f[2]])
				}
				if f[0] != fmt.Sprint(part[f[2]]) {
					t.Errorf("kcat read key %s from partition %s, franz-go from %d", f[2], f[0], part[f[2]])
				}
			}
		})
	}

	t.Run("franz-go zstd, kcat consumes", func(t *testing.T) {
		const topic, n = "kcat-zstd", 500
		CreateTopic(t, b, topic, 1, nil)
		prod := b.Client(t,
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.ZstdCompression()),
			kgo.ProducerLinger(20*time.Millisecond),
		)
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "z%03d", i), Value: compressibleValue(0, i)})
		}
		produceAll(t, prod, recs, 30*time.Second)
		lines := kcatConsume(t, bin, b, topic)
		if len(lines) != n {
			t.Fatalf("kcat -C read %d zstd records, want %d", len(lines), n)
		}
		for i, l := range lines {
			want := fmt.Sprintf("0|%d|z%03d|%s", i, i, compressibleValue(0, i))
			if l != want {
				t.Fatalf("kcat line %d: %q, want %q", i, l, want)
			}
		}
	})

	t.Run("kcat reads after DeleteRecords", func(t *testing.T) {
		// librdkafka must start at the log start offset when asked for
		// "beginning" after records were deleted.
		const topic = "kcat-trunc"
		CreateTopic(t, b, topic, 1, nil)
		prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for i := range 50 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "t%02d", i), Value: fmt.Appendf(nil, "v%02d", i)})
		}
		produceAll(t, prod, recs, 30*time.Second)
		runKcat(t, bin, nil, 30*time.Second, "-b", b.KafkaAddr, "-L") // warm up
		adm := b.Admin(t)
		resp, err := adm.DeleteRecords(ctxTimeout(t, requestTimeout), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 20}}})
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resp.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 20 {
			t.Fatalf("DeleteRecords: %+v", r)
		}
		lines := kcatConsume(t, bin, b, topic)
		if len(lines) != 30 || lines[0] != "0|20|t20|v20" {
			t.Errorf("kcat after DeleteRecords(20): %d records, first lines %q; want 30 starting with \"0|20|t20|v20\"", len(lines), lines[:min(len(lines), 3)])
		}
	})
}
