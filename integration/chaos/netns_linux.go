//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The namespace network: a bridge in a namespace of its own ("hub"), one
// namespace per broker and one for the test's clients, each joined to the
// bridge by a veth pair, on a /24 of 10.213.0.0/16 that exists only inside
// those namespaces. The test process stays in the root namespace and opens
// its connections from the client namespace (DialContext), so nothing in
// the root namespace routes to the brokers; an "unreachable" route for the
// subnet there makes any connection that would bypass DialContext fail at
// once instead of leaving the machine.
//
// Cutting the link between brokers a and b adds a blackhole route for b's
// address in a's namespace and one for a's in b's: packets between them are
// dropped silently (established connections stall, new ones fail), while
// both still reach the third broker and the clients. The kernel this runs
// on has no tc drop actions (no gact, no netem), so routes it is.

const (
	netnsPrefix    = "wch"
	ipCmdTimeout   = 10 * time.Second
	clientHostByte = 200
)

// netnsNetwork is the namespace network of n brokers.
type netnsNetwork struct {
	name     string // unique prefix of the namespaces: wch<pid>r<hex>
	subnet   string // 10.213.k
	n        int
	clientNS *os.File // the client namespace, for setns
	rootNS   *os.File // the namespace the test started in, to return to
	ownRoute bool     // the root namespace's unreachable route is ours to remove
	logf     func(string, ...any)
}

// NamespacesAvailable reports why the namespace network cannot be used, or
// nil when it can: it needs root, ip(8) and a working "ip netns add".
func NamespacesAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("not running as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("ip(8) is not on PATH")
	}
	return nil
}

// NewNamespaceNetwork creates the namespaces, bridge and links for n
// brokers. On an error everything created so far is removed again.
// Namespaces left behind by an earlier run that died (its pid is gone) are
// removed first.
func NewNamespaceNetwork(n int, rng *rand.Rand, logf func(string, ...any)) (Network, error) {
	if err := NamespacesAvailable(); err != nil {
		return nil, err
	}
	sweepStaleNamespaces(logf)
	nn := &netnsNetwork{
		name:   fmt.Sprintf("%s%dr%04x", netnsPrefix, os.Getpid(), rng.IntN(1<<16)),
		subnet: fmt.Sprintf("10.213.%d", 1+rng.IntN(250)),
		n:      n,
		logf:   logf,
	}
	if err := nn.setUp(); err != nil {
		if cerr := nn.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", cerr))
		}
		return nil, err
	}
	return nn, nil
}

func (nn *netnsNetwork) ns(role string) string { return nn.name + "-" + role }

func brokerRole(i int) string { return "n" + strconv.Itoa(i) }

// members are the namespaces on the bridge with their host byte.
func (nn *netnsNetwork) members() map[string]int {
	m := map[string]int{"cl": clientHostByte}
	for i := range nn.n {
		m[brokerRole(i)] = i + 1
	}
	return m
}

func (nn *netnsNetwork) setUp() error {
	hub := nn.ns("hub")
	steps := [][]string{
		{"netns", "add", hub},
		{"-n", hub, "link", "set", "lo", "up"},
		{"-n", hub, "link", "add", "br0", "type", "bridge"},
		{"-n", hub, "link", "set", "br0", "up"},
	}
	for role, host := range nn.members() {
		ns := nn.ns(role)
		port := "v" + role
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", hub, "link", "set", port, "master", "br0"},
			[]string{"-n", hub, "link", "set", port, "up"},
			[]string{"-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", nn.subnet, host), "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := runIP(s...); err != nil {
			return err
		}
	}
	switch err := runIP("route", "add", "unreachable", nn.subnet+".0/24"); {
	case err == nil:
		nn.ownRoute = true
	case strings.Contains(err.Error(), "File exists"):
		// Another run drew the same subnet; its route serves us too.
	default:
		return err
	}
	f, err := os.Open(filepath.Join("/run/netns", nn.ns("cl")))
	if err != nil {
		return fmt.Errorf("opening the client namespace: %w", err)
	}
	nn.clientNS = f
	if nn.rootNS, err = os.Open("/proc/thread-self/ns/net"); err != nil {
		return fmt.Errorf("opening the test's own namespace: %w", err)
	}
	return nil
}

// runIP runs ip(8) with args (bounded) and returns its output in the error.
func runIP(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), ipCmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sweepStaleNamespaces deletes namespaces of this suite whose creating
// process no longer exists (a run killed before its cleanup).
func sweepStaleNamespaces(logf func(string, ...any)) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, netnsPrefix)
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "r")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", pidText)); err == nil {
			continue
		}
		if err := runIP("netns", "del", name); err != nil {
			logf("removing stale namespace %s: %v", name, err)
		} else {
			logf("removed stale namespace %s (pid %d is gone)", name, pid)
		}
	}
}

func (nn *netnsNetwork) Host(i int) string { return fmt.Sprintf("%s.%d", nn.subnet, i+1) }

// Ports are the same on every broker: each has an address of its own.
func (nn *netnsNetwork) Ports(int) (int, int, int) { return 9092, 9644, 33145 }

// Command runs bin in broker i's namespace. ip netns exec execs bin in
// place, so the process started is the broker itself (signals reach it).
func (nn *netnsNetwork) Command(i int, bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", nn.ns(brokerRole(i)), bin}, args...)...)
}

// DialContext opens the connection from the client namespace: a socket
// belongs to the namespace of the thread that created it, so a goroutine
// locked to a thread joins the namespace, dials and returns to the test's
// namespace before unlocking. Should the return fail, the goroutine exits
// locked and the runtime ends the thread rather than reuse it. Letting
// every such thread end instead would be simpler but wrong: a thread that
// once started a broker is its parent for Pdeathsig, and its end would
// kill the broker.
func (nn *netnsNetwork) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(nn.clientNS.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still in the test's namespace
			ch <- result{nil, fmt.Errorf("entering the client namespace: %w", err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		ch <- result{c, err}
		if unix.Setns(int(nn.rootNS.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	r := <-ch
	return r.conn, r.err
}

func (nn *netnsNetwork) CanPartition() bool { return true }

func (nn *netnsNetwork) Cut(a, b int) error {
	return errors.Join(
		runIP("-n", nn.ns(brokerRole(a)), "route", "add", "blackhole", nn.Host(b)+"/32"),
		runIP("-n", nn.ns(brokerRole(b)), "route", "add", "blackhole", nn.Host(a)+"/32"),
	)
}

func (nn *netnsNetwork) Heal(a, b int) error {
	return errors.Join(
		runIP("-n", nn.ns(brokerRole(a)), "route", "del", "blackhole", nn.Host(b)+"/32"),
		runIP("-n", nn.ns(brokerRole(b)), "route", "del", "blackhole", nn.Host(a)+"/32"),
	)
}

// Close deletes the namespaces (which removes their links and routes) and
// the root namespace's route. The brokers must have exited: a namespace
// lives on while a process is inside it.
func (nn *netnsNetwork) Close() error {
	var errs []error
	for _, f := range []*os.File{nn.clientNS, nn.rootNS} {
		if f != nil {
			f.Close()
		}
	}
	roles := []string{"hub"}
	for role := range nn.members() {
		roles = append(roles, role)
	}
	for _, role := range roles {
		ns := nn.ns(role)
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
			continue
		}
		if err := runIP("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if nn.ownRoute {
		if err := runIP("route", "del", "unreachable", nn.subnet+".0/24"); err != nil {
			errs = append(errs, err)
		}
		nn.ownRoute = false
	}
	return errors.Join(errs...)
}

func (nn *netnsNetwork) Describe() string {
	return fmt.Sprintf("network namespaces %s-*, brokers at %s.1-%d on a private bridge, clients at %s.%d",
		nn.name, nn.subnet, nn.n, nn.subnet, clientHostByte)
}
