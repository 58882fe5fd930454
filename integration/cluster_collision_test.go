package integration

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClusterNodeIDCollision: a second process claiming a live broker's
// node id, with data of its own, is refused with a clear error and does
// not disturb the cluster (it must not take the live broker's place in
// the controller group).
func TestClusterNodeIDCollision(t *testing.T) {
	t.Parallel()
	bs := StartCluster(t, 3)
	addrs := freeLoopbackAddrs(t, 3)
	seeds := make([]string, len(bs))
	for i, b := range bs {
		seeds[i] = b.RPCAddr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, WeirBinary(t),
		"--node-id", "1", "--data-dir", t.TempDir(),
		"--kafka-addr", addrs[0], "--admin-addr", addrs[1], "--rpc-addr", addrs[2],
		"--seeds", strings.Join(seeds, ","))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the colliding broker neither started nor gave up:\n%s", stderr.String())
	}
	if err == nil {
		t.Fatalf("a second broker with node id 1 started:\n%s", stderr.String())
	}
	if out := stderr.String(); !strings.Contains(out, "DUPLICATE_BROKER_REGISTRATION") || !strings.Contains(out, "node id 1") {
		t.Fatalf("unclear refusal:\n%s", out)
	}
	// The cluster is untouched: three brokers, node 1 at its own address.
	waitClusterView(t, bs, 20*time.Second)
	md, err := askMetadata(t, bs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, br := range md.Brokers {
		if br.NodeID == 1 && !strings.HasSuffix(bs[1].KafkaAddr, ":"+strconv.Itoa(int(br.Port))) {
			t.Fatalf("node 1 now advertises port %d, want %s", br.Port, bs[1].KafkaAddr)
		}
	}
	createTopicVia(t, bs[2], "after-collision", 3)
}
