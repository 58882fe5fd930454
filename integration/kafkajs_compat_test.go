package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	npmCITimeout   = 5 * time.Minute
	kafkajsTimeout = 4 * time.Minute
)

// TestKafkajsCompat runs integration/compat/kafkajs/compat.js (kafkajs, the
// version pinned by its package-lock.json) against a weir broker: admin
// createTopics/listTopics/describeCluster/fetchTopicMetadata/
// describeConfigs/createPartitions/deleteTopicRecords/deleteTopics, 5,000
// records each with no compression, gzip and an idempotent producer
// (acks -1), ListOffsets by end, start and timestamp, and every record read
// back through kafkajs's consumer fetch path (Fetch v11, read_committed),
// and consumer groups: the public group consumer (kafka.consumer({groupId}),
// subscribe, run with eachMessage) reads a 4-partition topic, a second
// member joins and the two split the partitions and read new records
// exactly once, one leaves and the other takes everything; admin
// listGroups, describeGroups (state, members, their metadata and
// assignments), fetchOffsets, setOffsets and resetOffsets (refused while the
// group has members), deleteGroups (NON_EMPTY_GROUP while it has members).
// kafkajs speaks only non-flexible versions (JoinGroup <= 5, SyncGroup <= 3,
// Heartbeat <= 3, LeaveGroup <= 3, OffsetCommit <= 5, OffsetFetch <= 4,
// FindCoordinator <= 2); compat.js prints the versions it used (INFO).
//
// It skips when node or npm is missing. npm ci needs the npm registry the
// first time (node_modules is git-ignored).
func TestKafkajsCompat(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping kafkajs compatibility: node is not installed (needs Node >= 18 and npm)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("skipping kafkajs compatibility: npm is not installed (needs Node >= 18 and npm)")
	}
	dir := filepath.Join(repoRoot(t), "integration", "compat", "kafkajs")
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		t.Fatalf("kafkajs compat package: %v", err)
	}

	// npm ci: exactly the locked kafkajs, a fresh node_modules.
	start := time.Now()
	out, err := runBounded(t, dir, npmCITimeout, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	if err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	t.Logf("npm ci took %v", time.Since(start).Round(time.Millisecond))

	// A new group's first member is not kept waiting for others.
	b := StartBroker(t, WithSet("cluster.group_initial_rebalance_delay_ms", "0"))
	start = time.Now()
	out, err = runBounded(t, dir, kafkajsTimeout, node, "compat.js", b.KafkaAddr)
	t.Logf("node compat.js %s (%v):\n%s", b.KafkaAddr, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("kafkajs compatibility failed: %v (output above)", err)
	}
	if !strings.Contains(out, "kafkajs compat: all ") {
		t.Fatalf("compat.js exited 0 without its closing line (output above)")
	}
}

// runBounded runs name args in dir, killing it after timeout, and returns
// its combined output.
func runBounded(t *testing.T, dir string, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"KAFKAJS_NO_PARTITIONER_WARNING=1",
		"NO_UPDATE_NOTIFIER=1",
		"npm_config_update_notifier=false",
		// compat.js's own watchdog fires before ours.
		"KAFKAJS_COMPAT_TIMEOUT_MS="+strconv.FormatInt((kafkajsTimeout-15*time.Second).Milliseconds(), 10),
	)
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	cmd.WaitDelay = 5 * time.Second // don't hang on pipes held by grandchildren
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = errors.Join(err, errors.New("timed out after "+timeout.String()))
	}
	return buf.String(), err
}
