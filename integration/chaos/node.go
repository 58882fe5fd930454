package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Timeouts of one broker process.
const (
	readyTimeout = 30 * time.Second
	stopTimeout  = 15 * time.Second
	killTimeout  = 10 * time.Second
)

// Node is one weir broker process of the cluster: its addresses, data
// directory and log file stay the same across restarts.
type Node struct {
	ID                            int
	KafkaAddr, AdminAddr, RPCAddr string
	DataDir, LogPath              string

	net  Network
	bin  string
	args []string
	env  []string

	mu     sync.Mutex
	cmd    *processHandle
	starts int
}

// processHandle is one run of the broker process.
type processHandle struct {
	pid     int
	proc    *os.Process
	done    chan struct{} // closed when the process exited
	waitErr error
	paused  bool
}

func (h *processHandle) exited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// newNode lays out broker id (node id id) with its data directory and log
// under dir; seeds are the other brokers' RPC addresses.
func newNode(id int, netw Network, bin, dir string, seeds []string, extraArgs, env []string) *Node {
	host := netw.Host(id)
	kp, ap, rp := netw.Ports(id)
	n := &Node{
		ID:        id,
		KafkaAddr: net.JoinHostPort(host, strconv.Itoa(kp)),
		AdminAddr: net.JoinHostPort(host, strconv.Itoa(ap)),
		RPCAddr:   net.JoinHostPort(host, strconv.Itoa(rp)),
		DataDir:   filepath.Join(dir, "node"+strconv.Itoa(id), "data"),
		LogPath:   filepath.Join(dir, "node"+strconv.Itoa(id), "weir.log"),
		net:       netw,
		bin:       bin,
	}
	// Chaos builds of the broker journal their logs' fsynced sizes here
	// (cmd/weir/unsyncedfs_on.go); outside the data directory, so that a
	// wipe leaves it.
	n.env = append([]string{unsyncedDirEnv + "=" + n.unsyncedDir()}, env...)
	n.args = append([]string{
		"--node-id", strconv.Itoa(id),
		"--data-dir", n.DataDir,
		"--kafka-addr", n.KafkaAddr,
		"--admin-addr", n.AdminAddr,
		"--rpc-addr", n.RPCAddr,
		"--seeds", strings.Join(seeds, ","),
		"--log-level", "info",
	}, extraArgs...)
	return n
}

// Start launches the broker process (not waiting for it to be ready).
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !n.cmd.exited() {
		return fmt.Errorf("node %d is already running (pid %d)", n.ID, n.cmd.pid)
	}
	if err := os.MkdirAll(filepath.Dir(n.LogPath), 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(logFile, "=== chaos: start #%d of node %d at %s: %s %s\n", n.starts, n.ID, time.Now().Format(time.RFC3339Nano), n.bin, strings.Join(n.args, " "))
	cmd := n.net.Command(n.ID, n.bin, n.args...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = filepath.Dir(n.LogPath)
	setProcAttrs(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting node %d: %w", n.ID, err)
	}
	h := &processHandle{pid: cmd.Process.Pid, proc: cmd.Process, done: make(chan struct{})}
	n.cmd = h
	go func() {
		err := cmd.Wait()
		logFile.Close()
		n.mu.Lock()
		h.waitErr = err
		n.mu.Unlock()
		close(h.done)
	}()
	return nil
}

func (n *Node) current() *processHandle {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd
}

// Running reports whether the process is alive (paused counts as alive).
func (n *Node) Running() bool {
	h := n.current()
	return h != nil && !h.exited()
}

// Paused reports whether the process is stopped with SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && n.cmd.paused
}

func (n *Node) signal(sig syscall.Signal) error {
	h := n.current()
	if h == nil || h.exited() {
		return fmt.Errorf("node %d is not running", n.ID)
	}
	if err := h.proc.Signal(sig); err != nil {
		return fmt.Errorf("signalling node %d (pid %d) with %v: %w", n.ID, h.pid, sig, err)
	}
	return nil
}

func (n *Node) waitExit(d time.Duration) bool {
	h := n.current()
	if h == nil {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-h.done:
		return true
	case <-tm.C:
		return false
	}
}

// Kill sends SIGKILL (continuing a paused process is not needed: SIGKILL
// ends a stopped process too) and waits for the exit.
func (n *Node) Kill() error {
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	if !n.waitExit(killTimeout) {
		return fmt.Errorf("node %d did not exit within %v of SIGKILL", n.ID, killTimeout)
	}
	return nil
}

// Pause stops the process with SIGSTOP; Resume continues it.
func (n *Node) Pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.setPaused(true)
	return nil
}

// Resume sends SIGCONT.
func (n *Node) Resume() error {
	n.setPaused(false)
	return n.signal(syscall.SIGCONT)
}

func (n *Node) setPaused(p bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.cmd.paused = p
	}
}

// Stop ends the process: SIGCONT (in case it is paused) and SIGTERM, then
// SIGKILL if it has not exited within stopTimeout. A process that is not
// running is left alone.
func (n *Node) Stop() error {
	if !n.Running() {
		return nil
	}
	_ = n.signal(syscall.SIGCONT)
	n.setPaused(false)
	_ = n.signal(syscall.SIGTERM)
	if n.waitExit(stopTimeout) {
		return nil
	}
	return n.Kill()
}

// unsyncedDirEnv names the journal directory of a chaos build's broker.
const unsyncedDirEnv = "WEIR_CHAOS_UNSYNCED_DIR"

func (n *Node) unsyncedDir() string { return filepath.Join(filepath.Dir(n.DataDir), "unsynced") }

// LoseUnsyncedOnCrash asks the broker's next start to drop what its
// partition logs wrote since their last fsync (a chaos build's broker
// does; others ignore it). Call it just before Kill.
func (n *Node) LoseUnsyncedOnCrash() error {
	if err := os.MkdirAll(n.unsyncedDir(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.unsyncedDir(), "crash"), nil, 0o644)
}

// WipeData removes the data directory; the process must not be running.
func (n *Node) WipeData() error {
	if n.Running() {
		return fmt.Errorf("node %d: not wiping the data directory of a running broker", n.ID)
	}
	if err := os.RemoveAll(n.DataDir); err != nil {
		return fmt.Errorf("wiping node %d's data directory: %w", n.ID, err)
	}
	return nil
}

// WaitReady polls GET /v1/status/ready until it answers 200, the process
// exits, or timeout passes.
func (n *Node) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := n.current()
	if h == nil {
		return fmt.Errorf("node %d was never started", n.ID)
	}
	httpc := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{DialContext: n.net.DialContext, DisableKeepAlives: true},
	}
	url := "http://" + n.AdminAddr + "/v1/status/ready"
	lastErr := errors.New("not polled yet")
	for {
		select {
		case <-h.done:
			return fmt.Errorf("node %d exited before it was ready (last readiness error: %v)", n.ID, lastErr)
		case <-ctx.Done():
			return fmt.Errorf("node %d: %s not ready within %v: %v", n.ID, url, timeout, lastErr)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := httpc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			lastErr = fmt.Errorf("status %d", resp.StatusCode)
		} else {
			lastErr = err
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// logSize is the log file's current size, a mark for logSince.
func (n *Node) logSize() int64 {
	st, err := os.Stat(n.LogPath)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince returns the log from byte offset mark on (at most 1 MiB).
func (n *Node) logSince(mark int64) string {
	return n.LogTail(max(0, min(n.logSize()-mark, 1<<20)))
}

// LogTail returns the last limit bytes of the broker's log.
func (n *Node) LogTail(limit int64) string {
	f, err := os.Open(n.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(log: %v)", err)
	}
	off := max(0, st.Size()-limit)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(log: %v)", err)
	}
	return string(buf)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}
