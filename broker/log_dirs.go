package broker

import (
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Log directories as DescribeLogDirs (kafka-log-dirs) shows them. A weir
// broker has one: <data_dir>/topics, every partition replica's log in
// it.

// LogDir is a broker's log directory and the replicas in it.
type LogDir struct {
	Path string
	// TotalBytes and UsableBytes are the file system's size and the
	// space left to this process; -1 when unknown.
	TotalBytes, UsableBytes int64
	Replicas                []ReplicaLog
}

// ReplicaLog is one replica's log in a directory.
type ReplicaLog struct {
	Topic     string
	Partition int32
	// Size is the bytes of its segment files.
	Size int64
	// OffsetLag is how far its log end is behind the partition's high
	// watermark as this broker knows it: 0 on the leader, and on a
	// follower until its leader told it (its progress reply).
	OffsetLag int64
}

// LogDirs describes this broker's log directory; only reports replicas of
// the partitions wanted lets through (nil: every replica).
func (rs *Replicas) LogDirs(wanted func(topic string, partition int32) bool) []LogDir {
	dir := LogDir{Path: filepath.Join(rs.node.DataDir, topicsDir), TotalBytes: -1, UsableBytes: -1}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir.Path, &st); err == nil {
		dir.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
		dir.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
	}
	for _, p := range rs.localReplicas() {
		if wanted != nil && !wanted(p.topic.Name(), p.Index) {
			continue
		}
		r := ReplicaLog{Topic: p.topic.Name(), Partition: p.Index, Size: p.log.Size()}
		if !p.IsLeader() {
			if hw := p.leaderHWPlus1.Load() - 1; hw > 0 {
				r.OffsetLag = max(0, hw-p.log.EndOffset())
			}
		}
		dir.Replicas = append(dir.Replicas, r)
	}
	slices.SortFunc(dir.Replicas, func(a, c ReplicaLog) int {
		if n := strings.Compare(a.Topic, c.Topic); n != 0 {
			return n
		}
		return int(a.Partition - c.Partition)
	})
	return []LogDir{dir}
}
