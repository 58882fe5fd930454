package raft

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/weir-broker/weir/raft/walstore"
)

// A node's Raft files, under Config.Dir (every group of a broker uses the
// same Dir):
//
//	<dir>/@shared-wal/             walstore: the Raft log and stable store
//	                               of every group on this node, one stream
//	                               with group commit (raft/walstore/doc.go)
//	<dir>/<group>/snapshots/       raft.FileSnapshotStore, newest snapshotRetain kept,
//	  <term>-<index>-<ms>/{meta.json,state.bin}   made at the group's first snapshot
//
// The shared log fsyncs before StoreLogs, Set and SetUint64 return: Raft
// counts a log entry toward a commit, and trusts a stored term or vote, as
// soon as these calls return, so neither may sit in the page cache. Many
// groups' calls in the same instant share one fsync.
//
// Earlier versions kept one raft-wal directory per group,
// <dir>/<group>/wal/. A group that finds one at Start is copied into the
// shared log once (migrateGroupWAL), then the directory is removed.
const (
	// sharedLogDir holds the node's shared Raft log. '@' is not allowed
	// in group names, so no group's directory can take this name.
	sharedLogDir = "@shared-wal"
	// legacyWALDir is where a group's own raft-wal lived.
	legacyWALDir = "wal"
	// snapshotsDir is where FileSnapshotStore keeps a group's snapshots.
	snapshotsDir = "snapshots"
	// snapshotRetain is how many snapshots each group keeps on disk.
	snapshotRetain = 2
)

// The keys hashicorp/raft keeps in its StableStore (raft.go); copied
// verbatim when a group's raft-wal is migrated.
var stableKeys = [...]struct {
	name   string
	uint64 bool
}{
	{"CurrentTerm", true},
	{"LastVoteTerm", true},
	{"LastVoteCand", false},
}

// groupStore is what a group keeps on disk: its view of the shared log
// and its own snapshots.
type groupStore struct {
	log   *walstore.GroupStore
	snaps *lazySnapshots
}

// lazySnapshots is a group's FileSnapshotStore, made on the first
// snapshot rather than at Start: making one creates two directories and
// a test file, and a new partition that never snapshots (most of them,
// while idle) should not pay that, nor keep the directories on disk.
type lazySnapshots struct {
	dir    string // <Config.Dir>/<group>
	logger hclog.Logger

	mu    sync.Mutex
	store *hraft.FileSnapshotStore // nil until made, by mu
}

// open returns the store, creating it unless create is false and it
// does not exist yet (nil then).
func (l *lazySnapshots) open(create bool) (*hraft.FileSnapshotStore, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store != nil {
		return l.store, nil
	}
	if !create {
		if _, err := os.Stat(filepath.Join(l.dir, snapshotsDir)); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	s, err := hraft.NewFileSnapshotStoreWithLogger(l.dir, snapshotRetain, l.logger.Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("raft: opening snapshot store %s: %w", l.dir, err)
	}
	l.store = s
	return s, nil
}

func (l *lazySnapshots) Create(version hraft.SnapshotVersion, index, term uint64, configuration hraft.Configuration,
	configurationIndex uint64, trans hraft.Transport) (hraft.SnapshotSink, error) {
	s, err := l.open(true)
	if err != nil {
		return nil, err
	}
	return s.Create(version, index, term, configuration, configurationIndex, trans)
}

func (l *lazySnapshots) List() ([]*hraft.SnapshotMeta, error) {
	s, err := l.open(false)
	if s == nil || err != nil {
		return nil, err
	}
	return s.List()
}

func (l *lazySnapshots) Open(id string) (*hraft.SnapshotMeta, io.ReadCloser, error) {
	s, err := l.open(false)
	if err != nil {
		return nil, nil, err
	}
	if s == nil {
		return nil, nil, fmt.Errorf("raft: no snapshot %s in %s", id, l.dir)
	}
	return s.Open(id)
}

// logStore returns the shared log for dir, opening it on first use. The
// Mux closes it after its groups.
func (m *Mux) logStore(dir string) (*walstore.Store, error) {
	m.storeMu.Lock()
	defer m.storeMu.Unlock()
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrShutdown
	}
	if s := m.stores[dir]; s != nil {
		return s, nil
	}
	s, err := walstore.Open(filepath.Join(dir, sharedLogDir), walstore.Options{Logger: m.log, Registerer: m.metrics.reg, PrepareSpares: true, HandOffBytes: m.handOff})
	if err != nil {
		return nil, fmt.Errorf("raft: opening the shared log in %s: %w", dir, err)
	}
	m.stores[dir] = s
	return s, nil
}

// closeStores closes the shared logs; every group is shut down by then.
func (m *Mux) closeStores() error {
	m.storeMu.Lock()
	defer m.storeMu.Unlock()
	var errs []error
	for dir, s := range m.stores {
		errs = append(errs, s.Close())
		delete(m.stores, dir)
	}
	return errors.Join(errs...)
}

func (m *Mux) openGroupStore(dir, group string, logger hclog.Logger) (*groupStore, error) {
	shared, err := m.logStore(dir)
	if err != nil {
		return nil, err
	}
	gdir := filepath.Join(dir, group)
	if err := migrateGroupWAL(filepath.Join(gdir, legacyWALDir), shared, group, logger); err != nil {
		return nil, err
	}
	return &groupStore{log: shared.Group(group), snaps: &lazySnapshots{dir: gdir, logger: logger}}, nil
}

// hasState reports whether the group was ever bootstrapped or joined: any
// term, log entry or snapshot on disk.
func (s *groupStore) hasState() (bool, error) {
	return hraft.HasExistingState(s.log, s.log, s.snaps)
}

// RemoveGroupState deletes a stopped group's Raft state on this node: its
// entries and term/vote in the shared log, and its snapshots. The group
// must not be running.
func (m *Mux) RemoveGroupState(dir, group string) error {
	if err := validGroupName(group); err != nil {
		return err
	}
	shared, err := m.logStore(dir)
	if err != nil {
		return err
	}
	return errors.Join(shared.DropGroup(group), os.RemoveAll(filepath.Join(dir, group)))
}

// migrateGroupWAL copies a group's own raft-wal directory, as earlier
// versions kept it, into the shared log, then removes it. It is safe to
// repeat after a crash at any point: while the old directory exists it
// is the truth, so whatever an interrupted copy left in the shared log is
// dropped and copied again; the directory goes only after every entry
// and key was stored (and so fsynced) in the shared log.
func migrateGroupWAL(walDir string, shared *walstore.Store, group string, logger hclog.Logger) error {
	if _, err := os.Stat(walDir); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	old, err := wal.Open(walDir, wal.WithLogger(logger.Named("wal")))
	if err != nil {
		return fmt.Errorf("raft: opening %s to migrate it: %w", walDir, err)
	}
	err = copyGroupLog(old, shared, group)
	if cerr := old.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raft: migrating %s into the shared log: %w", walDir, err)
	}
	if err := os.RemoveAll(walDir); err != nil {
		return fmt.Errorf("raft: removing migrated %s: %w", walDir, err)
	}
	logger.Info("migrated the group's raft-wal into the shared log", "dir", walDir)
	return nil
}

// migrateBatch bounds the entries copied per StoreLogs.
const migrateBatch = 64

func copyGroupLog(old *wal.WAL, shared *walstore.Store, group string) error {
	if err := shared.DropGroup(group); err != nil {
		return err
	}
	gs := shared.Group(group)
	for _, k := range stableKeys {
		if k.uint64 {
			v, err := old.GetUint64([]byte(k.name))
			if err != nil || v == 0 {
				continue // never set
			}
			if err := gs.SetUint64([]byte(k.name), v); err != nil {
				return err
			}
			continue
		}
		v, err := old.Get([]byte(k.name))
		if err != nil || len(v) == 0 {
			continue
		}
		if err := gs.Set([]byte(k.name), v); err != nil {
			return err
		}
	}
	first, err := old.FirstIndex()
	if err != nil {
		return err
	}
	last, err := old.LastIndex()
	if err != nil {
		return err
	}
	if first == 0 || last < first {
		return nil
	}
	batch := make([]*hraft.Log, 0, migrateBatch)
	for i := first; i <= last; i++ {
		l := new(hraft.Log)
		if err := old.GetLog(i, l); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		batch = append(batch, l)
		if len(batch) == migrateBatch || i == last {
			if err := gs.StoreLogs(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}
