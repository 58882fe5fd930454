package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Building the weir and weirctl binaries (once per test binary), and TestMain,
// which removes them when the tests are done.

var (
	buildDirMu sync.Mutex
	buildDir   string // shared by the whole package, removed by TestMain

	weirOnce    sync.Once
	weirPath    string
	weirErr     error
	weirctlOnce sync.Once
	weirctlPath string
	weirctlErr  error

	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	buildDirMu.Lock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	buildDirMu.Unlock()
	os.Exit(code)
}

// repoRoot returns the module root: the integration tests run in
// <root>/integration, so the root is the nearest ancestor holding the
// weir go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		dir := wd
		for range 6 { // bounded walk up
			data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err == nil && strings.Contains(string(data), "module github.com/weir-broker/weir") {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
		rootErr = fmt.Errorf("no weir go.mod above %s", wd)
	})
	if rootErr != nil {
		t.Fatalf("locating repo root: %v", rootErr)
	}
	return rootDir
}

func sharedBuildDir(t testing.TB) string {
	t.Helper()
	buildDirMu.Lock()
	defer buildDirMu.Unlock()
	if buildDir == "" {
		d, err := os.MkdirTemp("", "weir-integration-bin-")
		if err != nil {
			t.Fatalf("creating build dir: %v", err)
		}
		buildDir = d
	}
	return buildDir
}

func goBuild(t testing.TB, pkg, name string) (string, error) {
	root := repoRoot(t)
	out := filepath.Join(sharedBuildDir(t), name)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	goBin := "go"
	if p, err := exec.LookPath("go"); err == nil {
		goBin = p
	}
	// weirtestlicense: the broker trusts the test license key and honours
	// WEIR_TEST_CLOCK_FILE (see cmd/weir/testclock_on.go); release builds
	// do neither.
	cmd := exec.CommandContext(ctx, goBin, "build", "-tags", "weirtestlicense", "-o", out, pkg)
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, buf.String())
	}
	t.Logf("built %s in %v", pkg, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// WeirBinary builds ./cmd/weir once per test binary and returns its path.
func WeirBinary(t testing.TB) string {
	t.Helper()
	weirOnce.Do(func() { weirPath, weirErr = goBuild(t, "./cmd/weir", "weir") })
	if weirErr != nil {
		t.Fatalf("building weir: %v", weirErr)
	}
	return weirPath
}

// WeirctlBinary builds ./cmd/weirctl once per test binary and returns its path.
func WeirctlBinary(t testing.TB) string {
	t.Helper()
	weirctlOnce.Do(func() { weirctlPath, weirctlErr = goBuild(t, "./cmd/weirctl", "weirctl") })
	if weirctlErr != nil {
		t.Fatalf("building weirctl: %v", weirctlErr)
	}
	return weirctlPath
}
