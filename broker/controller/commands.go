package controller

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Command encoding (one Raft log entry's Data):
//
//	offset  size  field
//	0       1     magic 0xC7
//	1       1     command type (CommandType)
//	2       1     command version (1..current for that type)
//	3       8     time: int64 big-endian Unix milliseconds, stamped by the
//	              proposer (the controller leader); Apply's only clock
//	11      n     body: one JSON object, the command's fields (tags below)
//
// Decoding is strict: unknown JSON fields, trailing bytes, a type or a
// version this code does not know are errors. A field is only ever added
// with a new command version; old versions stay decodable forever (the
// log and snapshots replay them), and are upgraded to the current struct
// when decoded. JSON keeps the format readable in a debugger and lets maps
// encode in sorted key order, so the same command always encodes to the
// same bytes.

const (
	commandMagic     = 0xC7
	commandHeaderLen = 11
)

// CommandType identifies a command in the encoding. Values are never
// reused.
type CommandType uint8

const (
	CmdInitCluster          CommandType = 1
	CmdRegisterBroker       CommandType = 2
	CmdHeartbeat            CommandType = 3
	CmdUnregisterBroker     CommandType = 4
	CmdCreateTopic          CommandType = 5
	CmdDeleteTopic          CommandType = 6
	CmdCreatePartitions     CommandType = 7
	CmdAlterTopicConfig     CommandType = 8
	CmdSetClusterProperties CommandType = 9
	CmdSetLicense           CommandType = 10
	CmdReportLeader         CommandType = 11
	CmdAllocateProducerIDs  CommandType = 12
	// CmdAlterScramCredentials is in scram.go.
	CmdAlterScramCredentials CommandType = 13
	// CmdCreateACLs and CmdDeleteACLs are in acl.go.
	CmdCreateACLs CommandType = 14
	CmdDeleteACLs CommandType = 15
	// CmdAlterClientQuotas is in quota.go.
	CmdAlterClientQuotas CommandType = 16
	// CmdReassignPartition and CmdCompleteReassignment are in reassign.go.
	CmdReassignPartition    CommandType = 17
	CmdCompleteReassignment CommandType = 18
)

var commandNames = map[CommandType]string{
	CmdInitCluster:           "InitCluster",
	CmdRegisterBroker:        "RegisterBroker",
	CmdHeartbeat:             "Heartbeat",
	CmdUnregisterBroker:      "UnregisterBroker",
	CmdCreateTopic:           "CreateTopic",
	CmdDeleteTopic:           "DeleteTopic",
	CmdCreatePartitions:      "CreatePartitions",
	CmdAlterTopicConfig:      "AlterTopicConfig",
	CmdSetClusterProperties:  "SetClusterProperties",
	CmdSetLicense:            "SetLicense",
	CmdReportLeader:          "ReportLeader",
	CmdAllocateProducerIDs:   "AllocateProducerIDs",
	CmdAlterScramCredentials: "AlterScramCredentials",
	CmdCreateACLs:            "CreateACLs",
	CmdDeleteACLs:            "DeleteACLs",
	CmdAlterClientQuotas:     "AlterClientQuotas",
	CmdReassignPartition:     "ReassignPartition",
	CmdCompleteReassignment:  "CompleteReassignment",
}

func (t CommandType) String() string {
	if n, ok := commandNames[t]; ok {
		return n
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// currentVersion is the version each command type is encoded at. Raise it
// (and teach decodeCommand the old one) when a command's fields change.
var currentVersion = map[CommandType]uint8{
	CmdInitCluster: 1, CmdRegisterBroker: 2, CmdHeartbeat: 1, CmdUnregisterBroker: 1,
	CmdCreateTopic: 2, CmdDeleteTopic: 1, CmdCreatePartitions: 1, CmdAlterTopicConfig: 2,
	CmdSetClusterProperties: 1, CmdSetLicense: 1, CmdReportLeader: 1, CmdAllocateProducerIDs: 1,
	CmdAlterScramCredentials: 1, CmdCreateACLs: 1, CmdDeleteACLs: 1, CmdAlterClientQuotas: 1,
	CmdReassignPartition: 1, CmdCompleteReassignment: 1,
}

// Command is one of the command structs of this file.
type Command interface {
	Type() CommandType
}

// Entry is one controller log entry: a command and the time its proposer
// stamped on it.
type Entry struct {
	TimeMs int64 // Unix milliseconds, > 0
	Cmd    Command
}

// InitCluster sets the cluster id, once. Repeating it with the same id is
// a no-op; another id is INCONSISTENT_CLUSTER_ID.
type InitCluster struct {
	ClusterID string `json:"cluster_id"`
}

// RegisterBroker registers a broker (or re-registers it after a restart).
// A node id held by a live broker of another incarnation or RPC address is
// refused with *NodeIDConflictError; the same incarnation and address
// re-registering keeps its epoch.
type RegisterBroker struct {
	NodeID      int32         `json:"node_id"`
	Incarnation IncarnationID `json:"incarnation"`
	KafkaAddr   string        `json:"kafka_addr"`
	RPCAddr     string        `json:"rpc_addr"`
	Rack        string        `json:"rack,omitempty"`
	AdminAddr   string        `json:"admin_addr,omitempty"`
	// ClusterID, when set, must match the cluster's.
	ClusterID string `json:"cluster_id,omitempty"`
	// Listeners are every Kafka listener (version 2), the first being
	// KafkaAddr's; version 1 had KafkaAddr only.
	Listeners []ListenerEndpoint `json:"listeners,omitempty"`
}

// Heartbeat renews a broker's session at the entry's time.
type Heartbeat struct {
	NodeID int32  `json:"node_id"`
	Epoch  uint64 `json:"epoch"` // the broker epoch RegisterBroker returned
}

// UnregisterBroker removes a broker. Epoch 0 matches any.
type UnregisterBroker struct {
	NodeID int32  `json:"node_id"`
	Epoch  uint64 `json:"epoch,omitempty"`
}

// CreateTopic creates a topic. The proposer generates ID and
// PlacementSeed (randomly), so Apply stays deterministic. With Assignment
// set, Partitions and ReplicationFactor may be 0 and are otherwise checked
// against it.
type CreateTopic struct {
	Name              string            `json:"name"`
	ID                TopicID           `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Assignment        [][]int32         `json:"assignment,omitempty"`
	Configs           map[string]string `json:"configs,omitempty"`
	Internal          bool              `json:"internal,omitempty"`
	PlacementSeed     uint32            `json:"placement_seed"`
	// ConfigRules is the topic config rules Configs are checked by; see
	// ConfigRules.
	ConfigRules ConfigRules `json:"-"`
}

// ConfigRules numbers the topic config validators over releases. It is
// the version of the CreateTopic and AlterTopicConfig entry (not a JSON
// field): an entry written by an older release is checked by the rules
// of that release when the log is replayed, so a value refused then
// stays refused and states never diverge. 0 in a command built in
// process means the current rules.
//
//	1: cleanup.policy=delete only and the first seven topic configs.
//	2: compaction (cleanup.policy compact, its lag, ratio and tombstone
//	   configs) and the other topic configs of Kafka 4.x.
type ConfigRules uint8

// CurrentConfigRules is the rules this release writes.
const CurrentConfigRules ConfigRules = 2

// version is the entry version of a command checked by these rules.
func (r ConfigRules) version() uint8 { return uint8(r.orCurrent()) }

func (c CreateTopic) version() uint8      { return c.ConfigRules.version() }
func (c AlterTopicConfig) version() uint8 { return c.ConfigRules.version() }

func (r ConfigRules) orCurrent() ConfigRules {
	if r == 0 {
		return CurrentConfigRules
	}
	return r
}

// TopicRef names a topic by ID, by name, or both (then both must match).
// Proposers resolving a name from their view should send both, so a topic
// deleted and created again meanwhile is never the one changed.
type TopicRef struct {
	Name string  `json:"name,omitempty"`
	ID   TopicID `json:"id,omitempty"`
}

// DeleteTopic deletes a topic. Internal topics cannot be deleted.
type DeleteTopic struct {
	TopicRef
}

// CreatePartitions raises a topic's partition count to Total. Assignment,
// if set, lists the new partitions' replicas.
type CreatePartitions struct {
	TopicRef
	Total         int32     `json:"total"`
	Assignment    [][]int32 `json:"assignment,omitempty"`
	PlacementSeed uint32    `json:"placement_seed"`
}

// ConfigOpType is an AlterTopicConfig operation, with Kafka's
// IncrementalAlterConfigs codes. APPEND and SUBTRACT are refused: the
// proposer expands them into SET.
type ConfigOpType int8

const (
	ConfigSet    ConfigOpType = 0
	ConfigDelete ConfigOpType = 1
)

// ConfigOp is one topic config change.
type ConfigOp struct {
	Name  string       `json:"name"`
	Op    ConfigOpType `json:"op"`
	Value string       `json:"value,omitempty"`
}

// AlterTopicConfig changes a topic's explicit configs. With Replace the
// topic's configs become exactly the SET operations (Kafka's non-
// incremental AlterConfigs).
type AlterTopicConfig struct {
	TopicRef
	Ops     []ConfigOp `json:"ops"`
	Replace bool       `json:"replace,omitempty"`
	// ConfigRules: as CreateTopic's.
	ConfigRules ConfigRules `json:"-"`
}

// PropertyChange sets a cluster property, or with Reset returns it to its
// default.
type PropertyChange struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	Reset bool   `json:"reset,omitempty"`
}

// SetClusterProperties changes cluster properties all at once or not at
// all. ExpectedVersion >= 0 must equal the current config version
// (optimistic concurrency, else INVALID_UPDATE_VERSION); -1 applies
// unconditionally. A batch that changes something raises the config
// version by one.
type SetClusterProperties struct {
	ExpectedVersion int64            `json:"expected_version"`
	Changes         []PropertyChange `json:"changes"`
}

// SetLicense stores a license blob (verified by every broker, and by
// Options.ValidateLicense when set).
type SetLicense struct {
	Blob []byte `json:"blob"`
}

// ReportLeader is sent by the leader of a partition's Raft group. A report
// whose Term is older than the stored one is ignored (FENCED_LEADER_EPOCH).
type ReportLeader struct {
	TopicID     TopicID `json:"topic_id"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Term        uint64  `json:"term"`
	// ISR, when set, is the leader's in-sync replicas (itself included).
	// A report repeating leader, epoch and term only changes the ISR.
	ISR []int32 `json:"isr,omitempty"`
}

// AllocateProducerIDs hands a broker a block of Count producer ids.
type AllocateProducerIDs struct {
	NodeID int32  `json:"node_id"`
	Epoch  uint64 `json:"epoch,omitempty"` // 0 matches any
	Count  int32  `json:"count"`
}

func (InitCluster) Type() CommandType          { return CmdInitCluster }
func (RegisterBroker) Type() CommandType       { return CmdRegisterBroker }
func (Heartbeat) Type() CommandType            { return CmdHeartbeat }
func (UnregisterBroker) Type() CommandType     { return CmdUnregisterBroker }
func (CreateTopic) Type() CommandType          { return CmdCreateTopic }
func (DeleteTopic) Type() CommandType          { return CmdDeleteTopic }
func (CreatePartitions) Type() CommandType     { return CmdCreatePartitions }
func (AlterTopicConfig) Type() CommandType     { return CmdAlterTopicConfig }
func (SetClusterProperties) Type() CommandType { return CmdSetClusterProperties }
func (SetLicense) Type() CommandType           { return CmdSetLicense }
func (ReportLeader) Type() CommandType         { return CmdReportLeader }
func (AllocateProducerIDs) Type() CommandType  { return CmdAllocateProducerIDs }

func typeOf(c Command) CommandType {
	if c == nil {
		return 0
	}
	return c.Type()
}

// MaxEntrySize bounds an encoded entry.
const MaxEntrySize = 16 << 20

// Encode encodes an entry at its command's current version.
func Encode(e Entry) ([]byte, error) {
	if e.Cmd == nil {
		return nil, fmt.Errorf("%w: no command", ErrMalformed)
	}
	t := e.Cmd.Type()
	ver, ok := currentVersion[t]
	if !ok {
		return nil, fmt.Errorf("%w: type %d", ErrUnsupportedVersion, t)
	}
	if v, ok := e.Cmd.(interface{ version() uint8 }); ok {
		ver = v.version()
	}
	if e.TimeMs <= 0 {
		return nil, fmt.Errorf("%w: time %d is not positive", ErrMalformed, e.TimeMs)
	}
	body, err := json.Marshal(e.Cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	out := make([]byte, commandHeaderLen, commandHeaderLen+len(body))
	out[0] = commandMagic
	out[1] = byte(t)
	out[2] = ver
	binary.BigEndian.PutUint64(out[3:], uint64(e.TimeMs))
	out = append(out, body...)
	if len(out) > MaxEntrySize {
		return nil, fmt.Errorf("%w: %d bytes is more than %d", ErrMalformed, len(out), MaxEntrySize)
	}
	return out, nil
}

// Decode decodes an entry. Errors wrap ErrMalformed or
// ErrUnsupportedVersion.
func Decode(b []byte) (Entry, error) {
	if len(b) < commandHeaderLen {
		return Entry{}, fmt.Errorf("%w: %d bytes is shorter than the header", ErrMalformed, len(b))
	}
	if len(b) > MaxEntrySize {
		return Entry{}, fmt.Errorf("%w: %d bytes is more than %d", ErrMalformed, len(b), MaxEntrySize)
	}
	if b[0] != commandMagic {
		return Entry{}, fmt.Errorf("%w: magic 0x%02x", ErrMalformed, b[0])
	}
	t, ver := CommandType(b[1]), b[2]
	cur, ok := currentVersion[t]
	if !ok {
		return Entry{}, fmt.Errorf("%w: unknown command type %d", ErrUnsupportedVersion, b[1])
	}
	if ver == 0 || ver > cur {
		return Entry{}, fmt.Errorf("%w: %v version %d (this weir knows 1..%d)", ErrUnsupportedVersion, t, ver, cur)
	}
	ts := int64(binary.BigEndian.Uint64(b[3:]))
	if ts <= 0 {
		return Entry{}, fmt.Errorf("%w: time %d is not positive", ErrMalformed, ts)
	}
	cmd, err := decodeCommand(t, ver, b[commandHeaderLen:])
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %v: %v", ErrMalformed, t, err)
	}
	return Entry{TimeMs: ts, Cmd: cmd}, nil
}

// decodeCommand decodes one version of one type. A type past version 1
// decodes its old versions into the current struct (RegisterBroker: see
// decodeRegisterBroker).
func decodeCommand(t CommandType, ver uint8, body []byte) (Command, error) {
	switch t {
	case CmdInitCluster:
		return decodeBody[InitCluster](body)
	case CmdRegisterBroker:
		return decodeRegisterBroker(ver, body)
	case CmdHeartbeat:
		return decodeBody[Heartbeat](body)
	case CmdUnregisterBroker:
		return decodeBody[UnregisterBroker](body)
	case CmdCreateTopic:
		c, err := decodeBody[CreateTopic](body)
		if err == nil {
			ct := c.(CreateTopic)
			ct.ConfigRules = ConfigRules(ver)
			c = ct
		}
		return c, err
	case CmdDeleteTopic:
		return decodeBody[DeleteTopic](body)
	case CmdCreatePartitions:
		return decodeBody[CreatePartitions](body)
	case CmdAlterTopicConfig:
		c, err := decodeBody[AlterTopicConfig](body)
		if err == nil {
			ac := c.(AlterTopicConfig)
			ac.ConfigRules = ConfigRules(ver)
			c = ac
		}
		return c, err
	case CmdSetClusterProperties:
		return decodeBody[SetClusterProperties](body)
	case CmdSetLicense:
		return decodeBody[SetLicense](body)
	case CmdReportLeader:
		return decodeBody[ReportLeader](body)
	case CmdAllocateProducerIDs:
		return decodeBody[AllocateProducerIDs](body)
	case CmdAlterScramCredentials:
		return decodeBody[AlterScramCredentials](body)
	case CmdCreateACLs:
		return decodeBody[CreateACLs](body)
	case CmdDeleteACLs:
		return decodeBody[DeleteACLs](body)
	case CmdAlterClientQuotas:
		return decodeBody[AlterClientQuotas](body)
	case CmdReassignPartition:
		return decodeBody[ReassignPartition](body)
	case CmdCompleteReassignment:
		return decodeBody[CompleteReassignment](body)
	}
	return nil, fmt.Errorf("%w: unknown command type %d", ErrUnsupportedVersion, t)
}

func decodeBody[T Command](body []byte) (Command, error) {
	var c T
	if err := strictJSON(body, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// strictJSON decodes exactly one JSON object with no unknown fields and
// nothing after it.
func strictJSON(b []byte, v any) error {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return errors.New("body is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// Result is what applying an entry answered; the group hands it to the
// proposer (raft.Group.Apply's response). Err is nil or wraps a
// kerr.Error (an *Error, or *NodeIDConflictError); ErrorCode gives the
// Kafka code to answer a client with.
type Result struct {
	Index uint64
	Err   error
	// Changed is false when the state (apart from the index) did not
	// change: a refusal, an ignored stale report, a no-op.
	Changed bool

	BrokerEpoch     uint64 // RegisterBroker
	Topic           *Topic // CreateTopic, CreatePartitions, AlterTopicConfig, DeleteTopic: the topic (as it was, for delete)
	ConfigVersion   int64  // SetClusterProperties
	LicenseVersion  int64  // SetLicense
	FirstProducerID int64  // AllocateProducerIDs
	// DeletedACLs holds, per DeleteACLs filter, the bindings it removed.
	DeletedACLs [][]ACLBinding
}

// ErrorCode is the Kafka error code of r.Err.
func (r Result) ErrorCode() int16 { return ErrorCode(r.Err) }

// kerrOr returns err if it wraps a kerr.Error, otherwise an *Error with
// code and err's text.
func kerrOr(err error, code *kerr.Error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return err
	}
	return &Error{Code: code, Message: err.Error()}
}
