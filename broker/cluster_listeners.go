package broker

import (
	"net"
	"strconv"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/config"
)

// ListenerAddr is one of a broker's Kafka listeners as it registered it.
type ListenerAddr struct {
	Name             string
	Addr             string // advertised host:port
	SecurityProtocol string
}

// On is the broker as clients of the named listener reach it: Host and
// Port are that listener's advertised address. ok is false when the
// broker has no such listener; Kafka then leaves the broker out of the
// answer rather than send the client to another listener. A broker
// registered before named listeners serves its one address under any name.
func (bi BrokerInfo) On(listener string) (BrokerInfo, bool) {
	if len(bi.listeners) == 0 {
		return bi, true
	}
	addr, ok := controller.BrokerRegistration{Listeners: bi.listeners}.Endpoint(listener)
	if !ok {
		return BrokerInfo{}, false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return BrokerInfo{}, false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return BrokerInfo{}, false
	}
	bi.Host, bi.Port = host, int32(n)
	return bi, true
}

// registeredListeners is what this broker registers: every listener of
// its node config with its advertised address. A node config built
// without listeners (tests) registers none, and its KafkaAddr serves
// every listener name.
func registeredListeners(listeners []config.Listener) []controller.ListenerEndpoint {
	var out []controller.ListenerEndpoint
	for _, l := range listeners {
		out = append(out, controller.ListenerEndpoint{Name: l.Name, Addr: l.Advertised(), SecurityProtocol: string(l.SecurityProtocol)})
	}
	return out
}

func listenerAddrs(endpoints []controller.ListenerEndpoint) []ListenerAddr {
	var out []ListenerAddr
	for _, e := range endpoints {
		out = append(out, ListenerAddr{Name: e.Name, Addr: e.Addr, SecurityProtocol: e.SecurityProtocol})
	}
	return out
}
