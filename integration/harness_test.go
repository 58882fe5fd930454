package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Timeouts used by the harness. Every wait in this package is bounded.
const (
	readyTimeout   = 20 * time.Second
	stopTimeout    = 15 * time.Second
	killTimeout    = 10 * time.Second
	buildTimeout   = 5 * time.Minute
	requestTimeout = 15 * time.Second
	logTailBytes   = 64 << 10
)

// WithRacks puts node i of a StartCluster cluster in racks[i].
func WithRacks(racks ...string) BrokerOption {
	return func(s *brokerSpec) { s.racks = racks }
}

// WithEnv adds KEY=value pairs to the broker's environment.
func WithEnv(kv ...string) BrokerOption {
	return func(s *brokerSpec) { s.env = append(s.env, kv...) }
}

// ---------------------------------------------------------------------------
// Broker options.

type brokerSpec struct {
	sets       []string  // key=value
	pingOpts   []kgo.Opt // the readiness ping's client options (SASL credentials)
	dataDir    string
	nodeID     int
	logLevel   string
	configFile string
	extraArgs  []string
	env        []string // KEY=value, added to the test's environment
	racks      []string // StartCluster: node i gets --rack racks[i]
}

// BrokerOption customises StartBroker.
type BrokerOption func(*brokerSpec)

// WithSet adds --set key=value.
func WithSet(key, value string) BrokerOption {
	return func(s *brokerSpec) { s.sets = append(s.sets, key+"="+value) }
}

// WithDataDir uses dir as the data directory instead of a fresh t.TempDir.
func WithDataDir(dir string) BrokerOption {
	return func(s *brokerSpec) { s.dataDir = dir }
}

// WithNodeID sets --node-id (default 1).
func WithNodeID(id int) BrokerOption {
	return func(s *brokerSpec) { s.nodeID = id }
}

// WithLogLevel sets --log-level (default: $WEIR_TEST_LOG_LEVEL or info).
func WithLogLevel(level string) BrokerOption {
	return func(s *brokerSpec) { s.logLevel = level }
}

// WithConfigFile passes --config file.
func WithConfigFile(path string) BrokerOption {
	return func(s *brokerSpec) { s.configFile = path }
}

// WithArgs appends raw command-line arguments.
func WithArgs(args ...string) BrokerOption {
	return func(s *brokerSpec) { s.extraArgs = append(s.extraArgs, args...) }
}

// ---------------------------------------------------------------------------
// Broker process.

// Broker is one weir process started by the test.
type Broker struct {
	KafkaAddr, AdminAddr, RPCAddr, DataDir string
	NodeID                                 int

	spec    brokerSpec
	bin     string
	args    []string
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process exited
	waitErr error
	starts  int

	rawMu     sync.Mutex
	rawClient *kgo.Client
}

// freeLoopbackAddrs reserves n distinct ephemeral ports on 127.0.0.1 and
// releases them.
func freeLoopbackAddrs(t testing.TB, n int) []string {
	t.Helper()
	// Hold all listeners open together so the ports are distinct.
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("reserving a port: %v", err)
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// StartBroker builds weir (once), starts it on free loopback ports with a
// temporary data directory and waits until it serves. The broker is stopped
// at cleanup; its log is dumped if the test failed.
func StartBroker(t testing.TB, opts ...BrokerOption) *Broker {
	t.Helper()
	spec := brokerSpec{nodeID: 1, logLevel: os.Getenv("WEIR_TEST_LOG_LEVEL")}
	if spec.logLevel == "" {
		spec.logLevel = "info"
	}
	for _, o := range opts {
		o(&spec)
	}
	if spec.dataDir == "" {
		spec.dataDir = t.TempDir()
	}
	bin := WeirBinary(t)
	logDir := t.TempDir()

	b := &Broker{
		DataDir: spec.dataDir,
		NodeID:  spec.nodeID,
		spec:    spec,
		bin:     bin,
		logPath: filepath.Join(logDir, "weir.log"),
	}
	t.Cleanup(func() { b.cleanup(t) })

	// Ports are released before the broker binds them, so another process
	// may grab one in between: retry a few times on a bind failure.
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		addrs := freeLoopbackAddrs(t, 3)
		b.KafkaAddr, b.AdminAddr, b.RPCAddr = addrs[0], addrs[1], addrs[2]
		b.args = b.buildArgs()
		if err := b.launch(); err != nil {
			t.Fatalf("starting weir: %v", err)
		}
		err := b.waitReady(readyTimeout)
		if err == nil {
			return b
		}
		lastErr = err
		exited := b.exited()
		if !exited {
			b.forceStop(t)
		}
		if exited && strings.Contains(b.logTail(8<<10), "address already in use") && attempt < 3 {
			t.Logf("weir could not bind its ports (attempt %d); retrying with new ports", attempt)
			continue
		}
		break
	}
	t.Fatalf("weir did not become ready: %v\n--- weir log (%s) ---\n%s", lastErr, b.logPath, b.logTail(logTailBytes))
	return nil
}

func (b *Broker) buildArgs() []string {
	args := []string{
		"--node-id", strconv.Itoa(b.spec.nodeID),
		"--data-dir", b.DataDir,
		"--kafka-addr", b.KafkaAddr,
		"--admin-addr", b.AdminAddr,
		"--rpc-addr", b.RPCAddr,
		"--log-level", b.spec.logLevel,
	}
	if b.spec.configFile != "" {
		args = append(args, "--config", b.spec.configFile)
	}
	for _, s := range b.spec.sets {
		args = append(args, "--set", s)
	}
	return append(args, b.spec.extraArgs...)
}

// Args returns the command-line arguments the broker was started with.
func (b *Broker) Args() []string { return append([]string(nil), b.args...) }

// LogPath is the file holding the broker's stdout and stderr.
func (b *Broker) LogPath() string { return b.logPath }

func (b *Broker) launch() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil && !b.exitedLocked() {
		return errors.New("weir is already running")
	}
	f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	b.starts++
	fmt.Fprintf(f, "=== harness: start #%d at %s: %s %s\n", b.starts, time.Now().Format(time.RFC3339Nano), b.bin, strings.Join(b.args, " "))
	cmd := exec.Command(b.bin, b.args...)
	if len(b.spec.env) > 0 {
		cmd.Env = append(os.Environ(), b.spec.env...)
	}
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Dir = filepath.Dir(b.logPath) // exists even if the data dir does not yet
	setProcAttrs(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	b.cmd = cmd
	b.done = done
	b.waitErr = nil
	go func() {
		err := cmd.Wait()
		f.Close()
		b.mu.Lock()
		b.waitErr = err
		b.mu.Unlock()
		close(done)
	}()
	return nil
}

func (b *Broker) exitedLocked() bool {
	if b.done == nil {
		return true
	}
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

func (b *Broker) exited() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exitedLocked()
}

// Running reports whether the broker process is alive.
func (b *Broker) Running() bool { return !b.exited() }

func (b *Broker) current() (*exec.Cmd, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd, b.done
}

func (b *Broker) exitState() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil || b.cmd.ProcessState == nil {
		return "not exited", -1
	}
	return b.cmd.ProcessState.String(), b.cmd.ProcessState.ExitCode()
}

// waitReady polls the admin readiness endpoint, then pings the Kafka
// listener with a kgo client, within timeout.
func (b *Broker) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, done := b.current()
	httpc := &http.Client{Timeout: time.Second}
	url := "http://" + b.AdminAddr + "/v1/status/ready"
	lastErr := errors.New("not polled yet")

	ready := false
	for !ready {
		select {
		case <-done:
			st, _ := b.exitState()
			return fmt.Errorf("weir exited before becoming ready (%s); last readiness error: %v", st, lastErr)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %v", url, timeout, lastErr)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := httpc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = true
				break
			}
			lastErr = fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
		} else {
			lastErr = err
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}

	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.KafkaAddr), kgo.RetryTimeout(time.Second)}, b.spec.pingOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		select {
		case <-done:
			st, _ := b.exitState()
			return fmt.Errorf("weir exited while pinging the Kafka listener (%s)", st)
		case <-ctx.Done():
			return fmt.Errorf("kafka listener %s did not answer a ping within %v: %v", b.KafkaAddr, timeout, lastErr)
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := cl.Ping(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		lastErr = err
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

func (b *Broker) signal(sig os.Signal) {
	cmd, _ := b.current()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// waitExit waits for the current process to exit within d.
func (b *Broker) waitExit(d time.Duration) bool {
	_, done := b.current()
	if done == nil {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-done:
		return true
	case <-tm.C:
		return false
	}
}

// forceStop SIGTERMs, then SIGKILLs after stopTimeout. No assertions.
func (b *Broker) forceStop(t testing.TB) {
	if b.exited() {
		return
	}
	b.signal(syscall.SIGTERM)
	if b.waitExit(stopTimeout) {
		return
	}
	t.Logf("weir did not exit within %v of SIGTERM; sending SIGKILL", stopTimeout)
	b.signal(syscall.SIGKILL)
	if !b.waitExit(killTimeout) {
		t.Errorf("weir (pid %d) did not exit after SIGKILL", b.pid())
	}
}

func (b *Broker) pid() int {
	cmd, _ := b.current()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	return cmd.Process.Pid
}

func (b *Broker) closeRawClient() {
	b.rawMu.Lock()
	defer b.rawMu.Unlock()
	if b.rawClient != nil {
		b.rawClient.Close()
		b.rawClient = nil
	}
}

func (b *Broker) cleanup(t testing.TB) {
	b.closeRawClient()
	b.forceStop(t)
	if t.Failed() {
		t.Logf("--- weir log (node %d, %s), last %d KiB ---\n%s", b.NodeID, b.logPath, logTailBytes>>10, b.logTail(logTailBytes))
	}
}

// Stop sends SIGTERM, waits up to 15 s and asserts exit code 0.
func (b *Broker) Stop(t testing.TB) {
	t.Helper()
	if b.exited() {
		t.Fatalf("Stop: weir is not running (%s)", first(b.exitState()))
	}
	b.signal(syscall.SIGTERM)
	if !b.waitExit(stopTimeout) {
		b.signal(syscall.SIGKILL)
		b.waitExit(killTimeout)
		t.Fatalf("weir did not exit within %v of SIGTERM (killed)\n%s", stopTimeout, b.logTail(16<<10))
	}
	if st, code := b.exitState(); code != 0 {
		t.Fatalf("weir exited with %s after SIGTERM, want exit status 0\n%s", st, b.logTail(16<<10))
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (b *Broker) Kill(t testing.TB) {
	t.Helper()
	if b.exited() {
		t.Fatalf("Kill: weir is not running (%s)", first(b.exitState()))
	}
	b.signal(syscall.SIGKILL)
	if !b.waitExit(killTimeout) {
		t.Fatalf("weir did not exit within %v of SIGKILL", killTimeout)
	}
}

// Start starts the broker again with the same ports and data directory and
// waits until it is ready.
func (b *Broker) Start(t testing.TB) {
	t.Helper()
	if err := b.launch(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := b.waitReady(readyTimeout); err != nil {
		b.forceStop(t)
		t.Fatalf("weir did not become ready after restart: %v\n--- weir log ---\n%s", err, b.logTail(logTailBytes))
	}
}

// Restart is Stop followed by Start.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	b.Stop(t)
	b.Start(t)
}

func first[A, B any](a A, _ B) A { return a }

func (b *Broker) logTail(n int64) string {
	f, err := os.Open(b.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(log stat: %v)", err)
	}
	off := int64(0)
	prefix := ""
	if st.Size() > n {
		off = st.Size() - n
		prefix = fmt.Sprintf("... (%d bytes omitted)\n", off)
	}
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(log read: %v)", err)
	}
	return prefix + string(buf)
}

// Log returns the complete broker log so far.
func (b *Broker) Log() string { return b.logTail(1 << 40) }

// ---------------------------------------------------------------------------
// Clients.

// Client returns a kgo client seeded with the broker, closed at cleanup.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(b.KafkaAddr)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client over a new kgo client.
func (b *Broker) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(b.Client(t))
}

// RawRequest issues req through a kgo client (kgo picks the highest version
// both sides support) and fails the test on a transport error.
func (b *Broker) RawRequest(t testing.TB, req kmsg.Request) kmsg.Response {
	t.Helper()
	b.rawMu.Lock()
	if b.rawClient == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.KafkaAddr), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			b.rawMu.Unlock()
			t.Fatalf("kgo.NewClient: %v", err)
		}
		b.rawClient = cl
	}
	cl := b.rawClient
	b.rawMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("request key %d (%T): %v", req.Key(), req, err)
	}
	return resp
}

// CreateTopic creates a topic with replication factor 1 and fails the test
// unless it is created and visible in metadata with all its partitions.
func CreateTopic(t testing.TB, b *Broker, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, partitions, 1, configs, name)
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", name, err)
	}
	r, ok := resp[name]
	if !ok {
		t.Fatalf("CreateTopics %s: no result for the topic in %v", name, resp)
	}
	if r.Err != nil {
		t.Fatalf("CreateTopics %s: %v (%s)", name, r.Err, r.ErrMessage)
	}
	waitTopicReady(t, b, name, partitions)
}

// waitTopicReady waits (≤10 s) until metadata lists the topic with n
// partitions, each with a leader.
func waitTopicReady(t testing.TB, b *Broker, name string, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp := b.RawRequest(t, req).(*kmsg.MetadataResponse)
		if len(resp.Topics) == 1 {
			mt := resp.Topics[0]
			okLeaders := 0
			for _, p := range mt.Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					okLeaders++
				}
			}
			if mt.ErrorCode == 0 && int32(len(mt.Partitions)) == n && okLeaders == int(n) {
				return
			}
			last = fmt.Sprintf("topic error %d, %d partitions, %d with leaders", mt.ErrorCode, len(mt.Partitions), okLeaders)
		} else {
			last = fmt.Sprintf("%d topics in metadata", len(resp.Topics))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("topic %s not ready with %d partitions within 10s: %s", name, n, last)
}

func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
