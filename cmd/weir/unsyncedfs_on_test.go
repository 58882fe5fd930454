//go:build weirchaos

package main

import (
	"os"
	"path/filepath"
	"testing"

	weirlog "github.com/weir-broker/weir/log"
)

// TestUnsyncedRenameCrashKeepsWholeFile kills the broker, in effect, at
// each point of an atomic file replacement: whatever the destination holds
// at the crash must survive the dropping of unsynced writes whole, as a
// real rename is atomic. The replacement here is longer than the file it
// replaces, as a checkpoint's is when its numbers grow a digit.
func TestUnsyncedRenameCrashKeepsWholeFile(t *testing.T) {
	const (
		before = "weir-partition-checkpoint 1\n99 999\n"
		after  = "weir-partition-checkpoint 1\n100 1000\n"
	)
	for _, crashAt := range []string{"before rename", "after rename", "after journal"} {
		t.Run(crashAt, func(t *testing.T) {
			dir := t.TempDir()
			j := &syncJournal{dir: filepath.Join(dir, "journal"), synced: map[string]int64{}}
			if err := os.MkdirAll(j.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fsys := &unsyncedFS{j: j}
			target := filepath.Join(dir, "raft-checkpoint")
			if err := weirlog.WriteFileAtomic(fsys, target, []byte(before)); err != nil {
				t.Fatal(err)
			}

			tmp := target + ".tmp"
			f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte(after)); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			want := before
			if err := j.beforeRename(tmp, target); err != nil {
				t.Fatal(err)
			}
			if crashAt != "before rename" {
				if err := os.Rename(tmp, target); err != nil {
					t.Fatal(err)
				}
				want = after
			}
			if crashAt == "after journal" {
				if err := j.afterRename(tmp, target); err != nil {
					t.Fatal(err)
				}
			}

			// The next start: a fresh journal reads the entries back.
			restarted := &syncJournal{dir: j.dir, synced: map[string]int64{}}
			if _, _, err := restarted.dropUnsynced(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("after a crash %s the file holds %q, want %q", crashAt, got, want)
			}
		})
	}
}
