package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// Node is the configuration of one broker process.
type Node struct {
	NodeID              int32  `koanf:"node_id"`
	DataDir             string `koanf:"data_dir"`
	KafkaAddr           string `koanf:"kafka_addr"`
	AdvertisedKafkaAddr string `koanf:"advertised_kafka_addr"`
	AdminAddr           string `koanf:"admin_addr"`
	RPCAddr             string `koanf:"rpc_addr"`
	Rack                string `koanf:"rack"`
	// Seeds are the RPC addresses of other brokers of the cluster. A node
	// with no seeds is a cluster of its own.
	Seeds    []string `koanf:"-"`
	LogLevel string   `koanf:"log_level"`

	// MaxRequestBytes is Kafka's socket.request.max.bytes: a frame whose
	// size prefix is larger closes the connection before anything is
	// allocated for it.
	MaxRequestBytes int32 `koanf:"max_request_bytes"`
	// QueuedMaxRequestBytes is Kafka's queued.max.request.bytes: the
	// bytes of requests read and not yet answered, over all
	// connections. While it is spent the broker stops reading sockets;
	// a request larger than it closes its connection.
	QueuedMaxRequestBytes int64 `koanf:"queued_max_request_bytes"`
	// FetchMemoryBudgetBytes bounds the bytes of fetch responses read
	// and not yet written, over all connections: 0 derives it from the
	// memory available (DefaultFetchMemoryBudget), -1 lifts the bound.
	FetchMemoryBudgetBytes int64 `koanf:"fetch_memory_budget_bytes"`
	// LogPageCacheBytes is how many bytes of the newest segment appends
	// the broker keeps in the page cache; older appended pages are
	// dropped once written back (log.PageCache). -1 leaves them to the
	// kernel, as Kafka does.
	LogPageCacheBytes int64 `koanf:"log_page_cache_bytes"`
	// ConnectionMaxUnwrittenBytes caps one connection's fetch response
	// (its max_bytes), so that a client that stops reading holds at most
	// this much of the budget.
	ConnectionMaxUnwrittenBytes int64 `koanf:"connection_max_unwritten_bytes"`
	// ConnectionMaxInflightRequests is how many requests one connection
	// may have read and not yet answered (pipelining clients send
	// several); beyond it the connection is not read.
	ConnectionMaxInflightRequests int `koanf:"connection_max_inflight_requests"`
	// MemoryLimitBytes sets the Go runtime's soft memory limit (as
	// GOMEMLIMIT does, which wins when set). 0, the default, keeps it
	// where the broker's memory is: headroom for what lies outside the
	// fetch and request budgets and none for the bytes they hold, at
	// most 90% of the cgroup's or machine's memory (memory.SoftLimit);
	// -1 leaves the runtime's default (no limit).
	MemoryLimitBytes int64 `koanf:"memory_limit_bytes"`
	// KafkaSASLMechanisms, when set, makes the Kafka listener
	// SASL_PLAINTEXT: clients authenticate with one of these mechanisms
	// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) against the cluster's SCRAM
	// credentials before anything else.
	KafkaSASLMechanisms []string `koanf:"-"`
	// Listeners are the node's Kafka listeners (see listeners_node.go):
	// the listeners key of the config file, or one listener made of
	// kafka_addr, advertised_kafka_addr and kafka_sasl_mechanisms.
	Listeners []Listener `koanf:"-"`
	// TLSReloadInterval is how often SSL and SASL_SSL listeners look for
	// replaced certificate files; 0 means DefaultTLSReloadInterval.
	TLSReloadInterval time.Duration `koanf:"tls_reload_interval"`
	// AdminPprof serves Go's /debug/pprof profiles on the admin API.
	AdminPprof bool `koanf:"admin_pprof"`
	// AdminTLS, when set, serves the admin API over HTTPS (admin_tls:
	// the keys of a listener's tls); see ParseAdminTLS.
	AdminTLS *ListenerTLS `koanf:"-"`

	// RaftSnapshotEntries: a partition's Raft group snapshots (fsyncs
	// its log and writes a checkpoint) once this many entries arrived
	// since the last snapshot, and RaftTrailingEntries are kept in the
	// Raft log behind it for followers that lag a little. A follower
	// further behind installs a snapshot and copies the records it lacks
	// from the leader's log. Together they bound the Raft log's disk use
	// per partition: each entry is one produced batch.
	RaftSnapshotEntries uint64 `koanf:"raft_snapshot_entries"`
	RaftTrailingEntries uint64 `koanf:"raft_trailing_entries"`

	// FetchCoalescerShards is how many shards the fetch read coalescer
	// has (each with its own read pool and cache index); 0 means
	// GOMAXPROCS.
	FetchCoalescerShards int `koanf:"fetch_coalescer_shards"`

	// Cluster holds initial values of cluster properties, applied when
	// the cluster is first created on this node's data directory.
	Cluster map[string]string `koanf:"cluster"`
}

// DefaultQueuedMaxRequestBytes is queued_max_request_bytes' default, as
// Kafka's queued.max.request.bytes would be if it were bounded.
const DefaultQueuedMaxRequestBytes = 256 << 20

// DefaultLogPageCacheBytes is log_page_cache_bytes' default: the
// kernel's page cache, as Kafka leaves it (docs/architecture.md, "Segment
// page cache", says what a budget costs and gains).
const DefaultLogPageCacheBytes = -1

// DefaultNode is a single-node broker on loopback with data in ./data.
func DefaultNode() map[string]any {
	return map[string]any{
		"node_id":                          0,
		"data_dir":                         "./data",
		"kafka_addr":                       "", // DefaultKafkaAddr, unless listeners is set
		"advertised_kafka_addr":            "",
		"admin_addr":                       "127.0.0.1:9644",
		"rpc_addr":                         "127.0.0.1:33145",
		"rack":                             "",
		"seeds":                            "",
		"log_level":                        "info",
		"max_request_bytes":                100 << 20,
		"queued_max_request_bytes":         DefaultQueuedMaxRequestBytes,
		"fetch_memory_budget_bytes":        0,
		"log_page_cache_bytes":             DefaultLogPageCacheBytes,
		"connection_max_unwritten_bytes":   32 << 20,
		"connection_max_inflight_requests": 6,
		"memory_limit_bytes":               0,
		"admin_pprof":                      false,
		"kafka_sasl_mechanisms":            "",
		"tls_reload_interval":              DefaultTLSReloadInterval.String(),
		"raft_snapshot_entries":            1024,
		"raft_trailing_entries":            512,
		"fetch_coalescer_shards":           0,
	}
}

// nodeFlags maps flag names (hyphenated, as people type them) to config
// keys (underscored, as YAML and env spell them).
func nodeFlags() []nodeFlag {
	return []nodeFlag{
		{"node-id", "node_id", "broker id, unique in the cluster"},
		{"data-dir", "data_dir", "directory holding this broker's data"},
		{"kafka-addr", "kafka_addr", "Kafka listener address (default " + DefaultKafkaAddr + "; not with listeners)"},
		{"advertised-kafka-addr", "advertised_kafka_addr", "Kafka address given to clients (empty: kafka-addr)"},
		{"admin-addr", "admin_addr", "admin HTTP API address"},
		{"rpc-addr", "rpc_addr", "internal RPC address"},
		{"rack", "rack", "rack or zone of this broker"},
		{"seeds", "seeds", "comma-separated RPC addresses of other brokers of the cluster"},
		{"log-level", "log_level", "debug, info, warn or error"},
	}
}

type nodeFlag struct{ flag, key, usage string }

// NodeFlagSet declares the node's command-line flags.
func NodeFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.String("config", "", "YAML config file")
	defaults := DefaultNode()
	for _, f := range nodeFlags() {
		// Defaults shown for people; koanf's posflag provider only lets
		// changed flags override the file and environment.
		fs.String(f.flag, fmt.Sprint(defaults[f.key]), f.usage)
	}
	fs.StringArray("set", nil, "override any config key: --set key=value (cluster.<property> for cluster properties)")
	return fs
}

// LoadNode parses args and builds the node config: defaults < YAML file <
// WEIR_ environment < flags. environ is os.Environ in production.
func LoadNode(args []string, environ func() []string) (Node, error) {
	fs := NodeFlagSet("weir")
	if err := fs.Parse(args); err != nil {
		return Node{}, err
	}
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(DefaultNode(), "."), nil); err != nil {
		return Node{}, fmt.Errorf("defaults: %w", err)
	}
	if path, _ := fs.GetString("config"); path != "" {
		if _, err := os.Stat(path); err != nil {
			return Node{}, fmt.Errorf("config file: %w", err)
		}
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Node{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	envProvider := env.Provider(".", env.Opt{
		Prefix: "WEIR_",
		// WEIR_KAFKA_ADDR -> kafka_addr; WEIR_CLUSTER__AUTO_CREATE_TOPICS_ENABLED
		// -> cluster.auto_create_topics_enabled.
		TransformFunc: func(k, v string) (string, any) {
			k = strings.ToLower(strings.TrimPrefix(k, "WEIR_"))
			return strings.ReplaceAll(k, "__", "."), v
		},
		EnvironFunc: environ,
	})
	if err := k.Load(envProvider, nil); err != nil {
		return Node{}, fmt.Errorf("environment: %w", err)
	}
	if err := k.Load(posflag.ProviderWithFlag(fs, ".", k, func(f *pflag.Flag) (string, any) {
		for _, nf := range nodeFlags() {
			if nf.flag == f.Name {
				return nf.key, posflag.FlagVal(fs, f)
			}
		}
		return "", nil // --config and --set are handled separately
	}), nil); err != nil {
		return Node{}, fmt.Errorf("flags: %w", err)
	}
	sets, _ := fs.GetStringArray("set")
	for _, s := range sets {
		key, value, ok := strings.Cut(s, "=")
		if !ok || key == "" {
			return Node{}, fmt.Errorf("--set %q: want key=value", s)
		}
		if err := k.Set(key, value); err != nil {
			return Node{}, fmt.Errorf("--set %q: %w", s, err)
		}
	}
	return unmarshalNode(k)
}

func unmarshalNode(k *koanf.Koanf) (Node, error) {
	var n Node
	if err := k.Unmarshal("", &n); err != nil {
		return Node{}, fmt.Errorf("config: %w", err)
	}
	// YAML gives cluster property values their own types (bool, int);
	// properties are parsed by the registry, so keep their text.
	n.Seeds = splitList(k.Get("seeds"))
	n.KafkaSASLMechanisms = splitList(k.Get("kafka_sasl_mechanisms"))
	listeners, err := ParseListeners(k.Get("listeners"))
	if err != nil {
		return Node{}, err
	}
	n.Listeners = listeners
	adminTLS, err := ParseAdminTLS(k.Get(adminTLSKey))
	if err != nil {
		return Node{}, err
	}
	n.AdminTLS = adminTLS
	n.Cluster = map[string]string{}
	for key, v := range k.Cut("cluster").All() {
		n.Cluster[key] = fmt.Sprint(v)
	}
	return n, n.resolveListeners()
}

// splitList reads a list key given as a YAML list or as one
// comma-separated string (flags and environment variables).
func splitList(v any) []string {
	var parts []string
	switch x := v.(type) {
	case string:
		parts = strings.Split(x, ",")
	case []any:
		for _, e := range x {
			parts = append(parts, fmt.Sprint(e))
		}
	case []string:
		parts = x
	}
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate reports the first invalid setting.
func (n Node) Validate() error {
	var errs []error
	if n.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node_id %d: must be >= 0", n.NodeID))
	}
	if n.RaftSnapshotEntries < 1 || n.RaftTrailingEntries < 1 {
		errs = append(errs, fmt.Errorf("raft_snapshot_entries %d and raft_trailing_entries %d: must be >= 1", n.RaftSnapshotEntries, n.RaftTrailingEntries))
	}
	if n.DataDir == "" {
		errs = append(errs, errors.New("data_dir: must not be empty"))
	}
	for name, addr := range map[string]string{"admin_addr": n.AdminAddr, "rpc_addr": n.RPCAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, addr, err))
		}
	}
	errs = append(errs, n.validateKafkaListeners()...)
	if d := n.TLSReloadInterval; d < 0 || d > 0 && d < 100*time.Millisecond || d > 24*time.Hour {
		errs = append(errs, fmt.Errorf("tls_reload_interval %v: want 100ms to 24h (0: %v)", d, DefaultTLSReloadInterval))
	}
	for _, seed := range n.Seeds {
		if _, _, err := net.SplitHostPort(seed); err != nil {
			errs = append(errs, fmt.Errorf("seeds: %q: %w", seed, err))
		}
	}
	if n.FetchCoalescerShards < 0 || n.FetchCoalescerShards > 1024 {
		errs = append(errs, fmt.Errorf("fetch_coalescer_shards %d: want 0 (GOMAXPROCS) to 1024", n.FetchCoalescerShards))
	}
	if n.QueuedMaxRequestBytes < 1024 {
		errs = append(errs, fmt.Errorf("queued_max_request_bytes %d: must be at least 1024", n.QueuedMaxRequestBytes))
	}
	if b := n.LogPageCacheBytes; b < -1 || b >= 0 && b < 16<<20 {
		errs = append(errs, fmt.Errorf("log_page_cache_bytes %d: want -1 (left to the kernel) or at least 16 MiB", b))
	}
	if b := n.FetchMemoryBudgetBytes; b < -1 || b > 0 && b < 1<<20 {
		errs = append(errs, fmt.Errorf("fetch_memory_budget_bytes %d: want -1 (unbounded), 0 (derived from memory) or at least 1 MiB", b))
	}
	if n.ConnectionMaxUnwrittenBytes < 64<<10 || n.ConnectionMaxUnwrittenBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("connection_max_unwritten_bytes %d: want 64 KiB to 1 GiB", n.ConnectionMaxUnwrittenBytes))
	}
	if n.ConnectionMaxInflightRequests < 2 || n.ConnectionMaxInflightRequests > 1024 {
		errs = append(errs, fmt.Errorf("connection_max_inflight_requests %d: want 2 to 1024", n.ConnectionMaxInflightRequests))
	}
	if n.MemoryLimitBytes < -1 || n.MemoryLimitBytes > 0 && n.MemoryLimitBytes < 64<<20 {
		errs = append(errs, fmt.Errorf("memory_limit_bytes %d: want 0 (follows the broker's memory), -1 (no limit) or at least 64 MiB", n.MemoryLimitBytes))
	}
	if err := ValidateAdminTLS(n.AdminTLS); err != nil {
		errs = append(errs, err)
	}
	if n.MaxRequestBytes < 1024 {
		errs = append(errs, fmt.Errorf("max_request_bytes %d: must be at least 1024", n.MaxRequestBytes))
	}
	switch n.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", n.LogLevel))
	}
	return errors.Join(errs...)
}
