package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// metaFile is the node's durable cluster metadata while weir runs as a
// single node; the controller's Raft group replaces it in a cluster.
//
// Format (JSON, version 1):
//
//	{"version":1, "cluster_id":"…", "next_producer_id":1000,
//	 "properties":{"name":"value"},
//	 "topics":[{"name":"t","id":"<base64 16 bytes>","partitions":3,"configs":{…}}]}
const metaFile = "meta.json"

const metaVersion = 1

type metaState struct {
	Version        int               `json:"version"`
	ClusterID      string            `json:"cluster_id"`
	NextProducerID int64             `json:"next_producer_id"`
	Properties     map[string]string `json:"properties,omitempty"`
	Topics         []topicMeta       `json:"topics"`
}

type topicMeta struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

func readMeta(dir string) (metaState, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return metaState{}, false, nil
	}
	if err != nil {
		return metaState{}, false, fmt.Errorf("read metadata: %w", err)
	}
	var m metaState
	if err := json.Unmarshal(b, &m); err != nil {
		return metaState{}, false, fmt.Errorf("parse %s: %w", metaFile, err)
	}
	if m.Version != metaVersion {
		return metaState{}, false, fmt.Errorf("%s: unsupported version %d", metaFile, m.Version)
	}
	return m, true, nil
}

// writeMeta replaces the metadata file atomically: a crash leaves either
// the old or the new file, never a torn one.
func writeMeta(dir string, m metaState) error {
	m.Version = metaVersion
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, metaFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write metadata: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync metadata: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close metadata: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, metaFile)); err != nil {
		return fmt.Errorf("install metadata: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
