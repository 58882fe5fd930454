package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// buildTimeout bounds compiling the broker.
const buildTimeout = 5 * time.Minute

// repoRoot is the nearest ancestor of the working directory holding weir's
// go.mod (the tests run in <root>/integration/chaos).
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	dir := wd
	for range 8 {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/weir-broker/weir\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("no weir go.mod above %s", wd)
}

// BuildBroker compiles ./cmd/weir into dir with the given extra build tags
// (always with weirtestlicense, which the integration tests' brokers are
// built with) and returns the binary's path.
func BuildBroker(dir string, tags ...string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("the go command is not on PATH")
	}
	out := filepath.Join(dir, "weir")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	allTags := strings.Join(append([]string{"weirtestlicense"}, tags...), ",")
	cmd := exec.CommandContext(ctx, goBin, "build", "-tags", allTags, "-o", out, "./cmd/weir")
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build -tags %s ./cmd/weir: %w\n%s", allTags, err, buf.String())
	}
	return out, nil
}
