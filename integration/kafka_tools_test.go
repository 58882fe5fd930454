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

// kafkaJars is one set of Kafka jars that .ci/kafka.sh fetches with mvn
// (once per test binary; the script reuses a complete earlier copy).
type kafkaJars struct {
	fetch, dir string // kafka.sh sub-commands: fetch the jars, print their directory
	usedBy     string // what the tests needing them test, for the skip message

	once sync.Once
	path string
	err  error
	out  string
}

var (
	// kafkaToolJars are the broker's and the tools' jars.
	kafkaToolJars = &kafkaJars{fetch: "fetch", dir: "libs", usedBy: "Apache Kafka's tools"}
	// kafkaFrameworkJars are Kafka Connect's and Kafka Streams' jars.
	kafkaFrameworkJars = &kafkaJars{fetch: "fetch-frameworks", dir: "frameworks", usedBy: "Kafka Connect and Kafka Streams"}
)

// get returns java and the directory of the jars, fetching them the first
// time. It skips the test without java or mvn; a failed fetch fails it.
func (k *kafkaJars) get(t *testing.T) (java, dir string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skipf("java not found on PATH; skipping a test of %s (needs a JDK 17+ and Maven)", k.usedBy)
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		t.Skipf("mvn not found on PATH; skipping a test of %s (needs Maven to fetch the Kafka jars)", k.usedBy)
	}
	k.once.Do(func() {
		script := filepath.Join(repoRoot(t), ".ci", "kafka.sh")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, script, k.fetch).CombinedOutput()
		if err != nil {
			k.err, k.out = err, string(out)
			return
		}
		dir, err := exec.CommandContext(ctx, script, k.dir).Output()
		k.path, k.err = strings.TrimSpace(string(dir)), err
	})
	if k.err != nil {
		t.Fatalf("fetching the jars for %s (.ci/kafka.sh %s): %v\n%s", k.usedBy, k.fetch, k.err, k.out)
	}
	return java, k.path
}

// kafkaLibs returns the directory of the Kafka jars, fetching them the
// first time.
func kafkaLibs(t *testing.T) (java, libs string) {
	t.Helper()
	return kafkaToolJars.get(t)
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
