package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
)

// Network places the brokers and carries the test's own connections to
// them. Loopback puts every broker on 127.0.0.1 and cannot partition;
// the namespace network (netns_linux.go) gives each broker an address of
// its own in its own network namespace, so links between two brokers can
// be cut while clients still reach both.
type Network interface {
	// Host is the address broker i listens on.
	Host(i int) string
	// Ports are the Kafka, admin and RPC ports of broker i.
	Ports(i int) (kafka, admin, rpc int)
	// Command runs bin with args where broker i lives.
	Command(i int, bin string, args ...string) *exec.Cmd
	// DialContext connects the test to a broker address; every client of
	// the test dials through it.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	// CanPartition reports whether Cut and Heal work.
	CanPartition() bool
	// Cut drops all traffic between brokers a and b, both ways; Heal
	// restores it.
	Cut(a, b int) error
	Heal(a, b int) error
	// Close removes what the network created.
	Close() error
	// Describe says what the network is, for the test log.
	Describe() string
}

// errNoPartitions is what Cut and Heal return on loopback.
var errNoPartitions = errors.New("network partitions need the namespace network (root and ip(8))")

// loopbackNetwork puts every broker on 127.0.0.1 with ports of its own.
type loopbackNetwork struct {
	ports [][3]int
}

// NewLoopbackNetwork reserves three ports for each of n brokers. The ports
// are drawn below Linux's ephemeral range (32768 and up), so that a port a
// killed broker leaves free is not taken by some outgoing connection before
// the broker comes back; each is checked to be free now.
func NewLoopbackNetwork(n int, rng *rand.Rand) (Network, error) {
	lb := &loopbackNetwork{}
	used := map[int]bool{}
	pick := func() (int, error) {
		for range 200 {
			p := 20000 + rng.IntN(12000)
			if used[p] {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				continue
			}
			l.Close()
			used[p] = true
			return p, nil
		}
		return 0, errors.New("no free loopback port in 20000-32000 after 200 tries")
	}
	for range n {
		var ports [3]int
		for j := range ports {
			p, err := pick()
			if err != nil {
				return nil, err
			}
			ports[j] = p
		}
		lb.ports = append(lb.ports, ports)
	}
	return lb, nil
}

func (lb *loopbackNetwork) Host(int) string { return "127.0.0.1" }

func (lb *loopbackNetwork) Ports(i int) (int, int, int) {
	return lb.ports[i][0], lb.ports[i][1], lb.ports[i][2]
}

func (lb *loopbackNetwork) Command(_ int, bin string, args ...string) *exec.Cmd {
	return exec.Command(bin, args...)
}

func (lb *loopbackNetwork) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (lb *loopbackNetwork) CanPartition() bool  { return false }
func (lb *loopbackNetwork) Cut(int, int) error  { return errNoPartitions }
func (lb *loopbackNetwork) Heal(int, int) error { return errNoPartitions }
func (lb *loopbackNetwork) Close() error        { return nil }

func (lb *loopbackNetwork) Describe() string {
	return fmt.Sprintf("loopback, ports %v (no partitions)", lb.ports)
}
