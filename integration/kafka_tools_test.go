package integration

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Apache Kafka's own command-line tools, run from the Kafka jars that
// .ci/kafka.sh fetches from Maven Central (once; later runs reuse the
// copy), are the compatibility oracle for the operator APIs: a tool that
// works against Kafka must work against weir unchanged. Tests using them
// skip without java or mvn.

// kafkaToolTimeout bounds one tool run (a JVM start included).
const kafkaToolTimeout = 2 * time.Minute

var kafkaToolLibs struct {
	once sync.Once
	dir  string
	err  error
	out  string
}

// kafkaLibs returns the directory of the Kafka jars, fetching them the
// first time.
func kafkaLibs(t *testing.T) (java, libs string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("java not found on PATH; skipping a test of Apache Kafka's tools (needs a JDK 17+ and Maven)")
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		t.Skip("mvn not found on PATH; skipping a test of Apache Kafka's tools (needs Maven to fetch the Kafka jars)")
	}
	kafkaToolLibs.once.Do(func() {
		script := filepath.Join(repoRoot(t), ".ci", "kafka.sh")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, script, "fetch").CombinedOutput()
		if err != nil {
			kafkaToolLibs.err, kafkaToolLibs.out = err, string(out)
			return
		}
		dir, err := exec.CommandContext(ctx, script, "libs").Output()
		kafkaToolLibs.dir, kafkaToolLibs.err = strings.TrimSpace(string(dir)), err
	})
	if kafkaToolLibs.err != nil {
		t.Fatalf("fetching the Kafka jars: %v\n%s", kafkaToolLibs.err, kafkaToolLibs.out)
	}
	return java, kafkaToolLibs.dir
}

// kafkaTool runs the tool whose main class is class with args and
// returns what it printed (stdout and stderr) and how it exited.
func kafkaTool(t *testing.T, class string, args ...string) (string, error) {
	t.Helper()
	java, libs := kafkaLibs(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkaToolTimeout)
	defer cancel()
	argv := append([]string{"-Xmx256m", "-cp", filepath.Join(libs, "*"), class}, args...)
	cmd := exec.CommandContext(ctx, java, argv...)
	setProcAttrs(cmd) // a timeout ends the JVM's whole process group
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s timed out after %v; output:\n%s", class, kafkaToolTimeout, out.String())
	}
	return out.String(), err
}
