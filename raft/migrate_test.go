package raft

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/weir-broker/weir/raft/walstore"
)

// legacyGroup runs a one-voter group the way earlier versions stored it
// (its own raft-wal in <dir>/<group>/wal, snapshots beside it), applies n
// commands and stops it, as a broker being upgraded would have left it.
func legacyGroup(t *testing.T, dir, group string, n int) fsmState {
	t.Helper()
	gdir := filepath.Join(dir, group)
	if err := os.MkdirAll(filepath.Join(gdir, legacyWALDir), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(filepath.Join(gdir, legacyWALDir), wal.WithSegmentSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(gdir, snapshotRetain, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	conf := hraft.DefaultConfig()
	conf.LocalID = "n0"
	conf.HeartbeatTimeout, conf.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	addr, trans := hraft.NewInmemTransport("")
	fsm := &countFSM{}
	r, err := hraft.NewRaft(conf, smAdapter{fsm}, w, w, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.BootstrapCluster(hraft.Configuration{Servers: []hraft.Server{{ID: "n0", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the legacy group's leader", func() bool { return r.State() == hraft.Leader })
	for i := 1; i <= n; i++ {
		if err := r.Apply(command(uint64(i)), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return fsm.state()
}

// TestMigrateLegacyWAL upgrades a group kept in its own raft-wal: every
// entry and its term come into the shared log, the old directory goes, the
// group replays its whole log into its state machine, keeps working and
// restarts from the shared log alone. A copy interrupted earlier (stray
// entries of the group in the shared log while the old directory is still
// there) is redone from the old directory.
func TestMigrateLegacyWAL(t *testing.T) {
	dir := t.TempDir()
	want := legacyGroup(t, dir, "mig", 150)

	// What an interrupted copy may have left: entries the old log does
	// not have, in the shared log.
	shared, err := walstore.Open(filepath.Join(dir, sharedLogDir), walstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stray := []*hraft.Log{{Index: 1, Term: 9, Type: hraft.LogCommand, Data: []byte("stray")}, {Index: 2, Term: 9, Type: hraft.LogCommand, Data: []byte("stray")}}
	if err := shared.Group("mig").StoreLogs(stray); err != nil {
		t.Fatal(err)
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}

	nodes := newNodes(t, 1)
	n := nodes[0]
	n.dir = dir
	cfg := func(sm StateMachine) Config {
		c := fastConfig("mig", n, sm)
		c.NodeID = "n0"
		return c
	}
	fsm := &countFSM{}
	g, err := n.mux.Start(cfg(fsm))
	if err != nil {
		t.Fatal(err)
	}
	if !g.HasExistingState() {
		t.Fatal("migrated group has no state")
	}
	if _, err := os.Stat(filepath.Join(dir, "mig", legacyWALDir)); !os.IsNotExist(err) {
		t.Fatalf("legacy wal directory still there after migration: %v", err)
	}
	// A lone voter elects itself whatever address its configuration
	// names, then applies the whole migrated log.
	waitFor(t, 10*time.Second, "the replayed state", func() bool { return fsm.state() == want })
	if term := g.Term(); term == 0 {
		t.Fatal("term not migrated")
	}
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}

	// A second start reads the shared log only and finds the same log.
	fsm2 := &countFSM{}
	g2, err := n.mux.Start(cfg(fsm2))
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Shutdown()
	waitFor(t, 10*time.Second, "the replayed state after restart", func() bool { return fsm2.state() == want })
}
