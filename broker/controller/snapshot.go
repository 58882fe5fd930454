package controller

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
)

// Snapshot format:
//
//	offset  size  field
//	0       8     magic "WEIRCTRL"
//	8       2     format version, uint16 big-endian (1)
//	10      n     body: one JSON object, snapshotV1 below
//	10+n    4     CRC-32C (Castagnoli) of the body, uint32 big-endian
//
// Every list in the body is sorted (brokers by node id, topics by name,
// properties by name) and maps encode with sorted keys, so one state
// always encodes to the same bytes: two nodes that applied the same log
// write byte-identical snapshots. Restore refuses an unknown version, a
// bad checksum, unknown fields and inconsistent contents (duplicate
// names or ids), and leaves the state untouched when it does.
const (
	snapshotMagic   = "WEIRCTRL"
	snapshotVersion = 1
	// MaxSnapshotSize bounds what Restore reads.
	MaxSnapshotSize = 1 << 30
)

type snapshotV1 struct {
	Index          uint64               `json:"index"`
	ClockMs        int64                `json:"clock_ms"`
	ClusterID      string               `json:"cluster_id"`
	CreatedMs      int64                `json:"created_ms,omitempty"`
	Brokers        []BrokerRegistration `json:"brokers"`
	Topics         []*Topic             `json:"topics"`
	Properties     []snapshotProperty   `json:"properties"`
	ConfigVersion  int64                `json:"config_version"`
	License        License              `json:"license"`
	NextProducerID int64                `json:"next_producer_id"`
	// ScramCredentials, sorted by user and mechanism.
	ScramCredentials []ScramCredential `json:"scram_credentials,omitempty"`
	// ACLs, sorted as View.ACLs lists them, and the index that last
	// changed them.
	ACLs      []ACLBinding `json:"acls,omitempty"`
	ACLsIndex uint64       `json:"acls_index,omitempty"`
	// ClientQuotas, sorted by entity key, and the index that last
	// changed them; both omitted when there are none, so snapshots of
	// clusters without quotas are as they always were.
	ClientQuotas      []ClientQuota `json:"client_quotas,omitempty"`
	ClientQuotasIndex uint64        `json:"client_quotas_index,omitempty"`
}

type snapshotProperty struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Version int64  `json:"version"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeSnapshot writes v in the snapshot format.
func (v *View) EncodeSnapshot(w io.Writer) error {
	s := snapshotV1{
		Index: v.index, ClockMs: v.clockMs, ClusterID: v.clusterID, CreatedMs: v.createdMs,
		Brokers: v.Brokers(), Topics: make([]*Topic, 0, len(v.topics)),
		Properties:    make([]snapshotProperty, 0, len(v.props)),
		ConfigVersion: v.configVersion, License: v.license, NextProducerID: v.nextProducerID,
		ScramCredentials:  v.ScramCredentials(),
		ACLs:              v.acls, // read-only: marshalled, not kept
		ACLsIndex:         v.aclsIndex,
		ClientQuotas:      v.ClientQuotas(),
		ClientQuotasIndex: v.quotasIndex,
	}
	for _, n := range v.TopicNames() {
		s.Topics = append(s.Topics, v.topics[n]) // read-only: marshalled, not kept
	}
	for n, p := range v.props {
		s.Properties = append(s.Properties, snapshotProperty{Name: n, Value: p.Value, Version: p.Version})
	}
	sort.Slice(s.Properties, func(i, j int) bool { return s.Properties[i].Name < s.Properties[j].Name })
	body, err := json.Marshal(&s)
	if err != nil {
		return fmt.Errorf("controller snapshot: %w", err)
	}
	var hdr [10]byte
	copy(hdr[:], snapshotMagic)
	binary.BigEndian.PutUint16(hdr[8:], snapshotVersion)
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(body, castagnoli))
	for _, b := range [][]byte{hdr[:], body, sum[:]} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("controller snapshot: %w", err)
		}
	}
	return nil
}

// ErrBadSnapshot wraps every snapshot decoding failure.
var ErrBadSnapshot = errors.New("controller: bad snapshot")

// decodeSnapshot reads a snapshot into a fresh View.
func decodeSnapshot(r io.Reader, timeoutView *View) (*View, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSnapshotSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read: %v", ErrBadSnapshot, err)
	}
	if len(b) > MaxSnapshotSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadSnapshot, MaxSnapshotSize)
	}
	if len(b) < 14 || string(b[:8]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a controller snapshot", ErrBadSnapshot)
	}
	if ver := binary.BigEndian.Uint16(b[8:]); ver != snapshotVersion {
		return nil, fmt.Errorf("%w: format version %d (this weir reads %d)", ErrBadSnapshot, ver, snapshotVersion)
	}
	body := b[10 : len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x", ErrBadSnapshot, got, want)
	}
	var s snapshotV1
	if err := strictJSON(body, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	v := emptyView(timeoutView.sessionTimeout)
	v.index, v.clockMs, v.clusterID, v.createdMs = s.Index, s.ClockMs, s.ClusterID, s.CreatedMs
	v.configVersion, v.nextProducerID = s.ConfigVersion, s.NextProducerID
	v.license = s.License
	if len(v.license.Blob) == 0 {
		v.license.Blob = nil
	}
	for i := range s.Brokers {
		b := s.Brokers[i]
		if _, dup := v.brokers[b.NodeID]; dup {
			return nil, fmt.Errorf("%w: broker %d twice", ErrBadSnapshot, b.NodeID)
		}
		v.brokers[b.NodeID] = &b
	}
	for _, t := range s.Topics {
		if t == nil || t.Name == "" || t.ID.IsZero() {
			return nil, fmt.Errorf("%w: topic without a name or id", ErrBadSnapshot)
		}
		if v.topics[t.Name] != nil || v.byID[t.ID] != nil {
			return nil, fmt.Errorf("%w: topic %q or id %s twice", ErrBadSnapshot, t.Name, t.ID)
		}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		for p, part := range t.Partitions {
			if len(part.Replicas) == 0 {
				return nil, fmt.Errorf("%w: topic %q partition %d has no replicas", ErrBadSnapshot, t.Name, p)
			}
		}
		v.topics[t.Name] = t
		v.byID[t.ID] = t
	}
	for _, p := range s.Properties {
		if _, dup := v.props[p.Name]; dup {
			return nil, fmt.Errorf("%w: property %q twice", ErrBadSnapshot, p.Name)
		}
		v.props[p.Name] = PropertyValue{Value: p.Value, Version: p.Version}
	}
	for _, c := range s.ScramCredentials {
		if err := ValidateScramCredential(c); err != nil {
			return nil, fmt.Errorf("%w: SCRAM credential of %q: %v", ErrBadSnapshot, c.User, err)
		}
		if _, dup := v.scram[c.User][c.Mechanism]; dup {
			return nil, fmt.Errorf("%w: %s credential of %q twice", ErrBadSnapshot, c.Mechanism, c.User)
		}
		if v.scram == nil {
			v.scram = map[string]map[string]ScramCredential{}
		}
		if v.scram[c.User] == nil {
			v.scram[c.User] = map[string]ScramCredential{}
		}
		v.scram[c.User][c.Mechanism] = c
	}
	for i, b := range s.ACLs {
		if err := ValidateACLBinding(b); err != nil {
			return nil, fmt.Errorf("%w: ACL %+v: %v", ErrBadSnapshot, b, err)
		}
		if i > 0 && compareACLBindings(s.ACLs[i-1], b) >= 0 {
			return nil, fmt.Errorf("%w: ACLs out of order or repeated at %+v", ErrBadSnapshot, b)
		}
	}
	if len(s.ACLs) > 0 {
		v.acls = s.ACLs
	}
	v.aclsIndex = s.ACLsIndex
	if v.quotas, err = decodeClientQuotas(s.ClientQuotas); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	v.quotasIndex = s.ClientQuotasIndex
	return v, nil
}

// SnapshotBytes returns the current state in the snapshot format.
func (s *State) SnapshotBytes() ([]byte, error) {
	var buf bytes.Buffer
	if err := s.View().EncodeSnapshot(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Restore replaces the whole state with a snapshot and tells subscribers
// (Change.Type 0, Prev the discarded state). On error the state is
// unchanged.
func (s *State) Restore(r io.Reader) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cur := s.view.Load()
	v, err := decodeSnapshot(r, cur)
	if err != nil {
		return err
	}
	s.publish(cur, v, 0, Result{Index: v.index, Changed: true})
	return nil
}
