//go:build unix

package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kgoCompatTimeout bounds .ci/compat.sh --short as a whole: building weir
// and franz-go's kgo test binary (cold cache), then the short subset, whose
// own loop budget is 240s.
const kgoCompatTimeout = 8 * time.Minute

// TestKgoCompatShort runs .ci/compat.sh --short: franz-go's own kgo
// integration tests (pkg/kgo at the version in go.mod) listed in
// integration/compat/kgo/short.txt, each alone against a fresh weir. It
// fails if any of them does not pass. The full run (every kgo integration
// test, checked against allow.txt) is make compat; failures that are
// expected today are explained in integration/compat/FINDINGS.md.
//
// It skips when a tool the script needs (bash, curl, python3, timeout) is
// missing.
func TestKgoCompatShort(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "python3", "timeout", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping kgo compatibility: %s is not installed", tool)
		}
	}
	root := repoRoot(t)
	script := filepath.Join(root, ".ci", "compat.sh")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("kgo compat script: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), kgoCompatTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "--short")
	cmd.Dir = root
	// The script's logs go to a directory of the test's, removed with it:
	// the logs of the kgo tests that did not pass are logged first.
	outDir := t.TempDir()
	cmd.Env = append(os.Environ(), "COMPAT_OUT="+outDir)
	defer func() {
		if t.Failed() {
			logKgoFailures(t, outDir)
		}
	}()
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	// The script stops its broker from its TERM trap; its own process
	// group lets us reach the broker too if the script does not.
	setProcAttrs(cmd)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	defer func() {
		if ctx.Err() != nil && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything left in the group
		}
	}()
	start := time.Now()
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = errors.Join(err, errors.New("timed out after "+kgoCompatTimeout.String()))
	}
	out := buf.String()
	t.Logf(".ci/compat.sh --short (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("kgo compatibility (short subset) failed: %v (output above)", err)
	}
	if !strings.Contains(out, "compat: OK") {
		t.Fatalf("compat.sh exited 0 without its closing line (output above)")
	}
}

// logKgoFailures logs, for each kgo test in compat.sh's output directory
// that did not pass (results.tsv: name, status, ...), the lines of its log
// that say why: the tests' own messages and results, kgo's warnings and
// errors, and what it logged about stale member epochs (KIP-848 commits),
// at most the last 48 KiB of them.
func logKgoFailures(t *testing.T, dir string) {
	t.Helper()
	results, err := os.ReadFile(filepath.Join(dir, "results.tsv"))
	if err != nil {
		t.Logf("no kgo results: %v", err)
		return
	}
	why := regexp.MustCompile(`sendErr|_test\.go:[0-9]+: |^\s*--- |^panic|\[(WARN|ERROR)\]|stale member epoch|lost_partitions`)
	for _, line := range strings.Split(strings.TrimSpace(string(results)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 2 || f[1] == "PASS" {
			continue
		}
		path := filepath.Join(dir, "logs", f[0]+".log")
		log, err := os.ReadFile(path)
		if err != nil {
			t.Logf("%s (%s): no log: %v", f[0], f[1], err)
			continue
		}
		var b strings.Builder
		for _, l := range strings.Split(string(log), "\n") {
			if why.MatchString(l) {
				b.WriteString(l)
				b.WriteByte('\n')
			}
		}
		out := b.String()
		const most = 48 << 10
		if len(out) > most {
			out = out[len(out)-most:]
		}
		t.Logf("--- %s (%s): from %s ---\n%s", f[0], f[1], path, out)
	}
}
