package raft

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// A group's files, under Config.Dir:
//
//	<dir>/<group>/
//	  wal/                         raft-wal: the Raft log and stable store
//	    wal-meta.db                bbolt: segment list, term, vote
//	    00000000000000000001-….wal segments, preallocated to LogSegmentSize
//	  snapshots/                   raft.FileSnapshotStore, newest snapshotRetain kept
//	    <term>-<index>-<ms>/{meta.json,state.bin}
//
// raft-wal fsyncs the segment before StoreLogs returns and commits the
// bbolt meta DB (fsync) before Set/SetUint64 return: Raft counts a log
// entry toward a commit, and trusts a stored term or vote, as soon as
// these calls return, so neither may sit in the page cache.
//
// Why raft-wal rather than raft-boltdb/v2: see doc.go (measured).
const (
	// defaultSegmentSize is raft-wal's segment size for a group. raft-wal
	// preallocates each segment with fallocate, so this is real disk per
	// group (1000 groups × 8 MiB = 8 GiB); its own 64 MiB default is sized
	// for one Consul log per server, not one per partition.
	defaultSegmentSize = 8 << 20
	// snapshotRetain is how many snapshots each group keeps on disk.
	snapshotRetain = 2
)

// groupStore is what a group keeps on disk.
type groupStore struct {
	log   *wal.WAL // LogStore, StableStore and MonotonicLogStore
	snaps *hraft.FileSnapshotStore
}

func openGroupStore(dir string, segmentSize int, logger hclog.Logger) (*groupStore, error) {
	walDir := filepath.Join(dir, "wal")
	if err := os.MkdirAll(walDir, 0o755); err != nil {
		return nil, err
	}
	w, err := wal.Open(walDir, wal.WithSegmentSize(segmentSize), wal.WithLogger(logger.Named("wal")))
	if err != nil {
		return nil, fmt.Errorf("raft: opening log store %s: %w", walDir, err)
	}
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(dir, snapshotRetain, logger.Named("snapshot"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("raft: opening snapshot store %s: %w", dir, err)
	}
	return &groupStore{log: w, snaps: snaps}, nil
}

// hasState reports whether the group was ever bootstrapped or joined: any
// term, log entry or snapshot on disk.
func (s *groupStore) hasState() (bool, error) {
	return hraft.HasExistingState(s.log, s.log, s.snaps)
}

func (s *groupStore) Close() error { return s.log.Close() }
