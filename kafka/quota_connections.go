package kafka

import (
	"net"
	"time"

	"github.com/weir-broker/weir/broker/controller"
)

// connection_creation_rate (KIP-612): new connections per second from
// one IP, set on the ip entity (an address, or the default for every
// address without its own). A connection over it is accepted and then,
// as Kafka does, closed once its throttle time has passed, unserved, so
// the client neither gets served nor reconnects at once. Connections
// are counted per address with the same 11 samples of one second as the
// other rates; the throttle is at most one window (Kafka's cap).

// connSensorKind marks connection sensors apart from the client quotas'.
const connSensorKind = numQuotaKinds

// connectionThrottle counts a new connection from addr against its IP's
// connection_creation_rate and returns how long to hold it before
// closing it, 0 when it may be served.
func (m *quotaManager) connectionThrottle(addr net.Addr) time.Duration {
	if m == nil {
		return 0
	}
	t := m.current()
	if !t.anyConnections {
		return 0
	}
	ip := addr.String()
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	limit, ok := t.byEntity[ipEntityKey(&ip)][controller.QuotaConnectionCreationRate]
	if !ok {
		if limit, ok = t.byEntity[ipEntityKey(nil)][controller.QuotaConnectionCreationRate]; !ok {
			return 0
		}
	}
	now := m.now()
	rate, span := m.sensor(sensorKey{kind: connSensorKind, user: ip}).record(1, now)
	if rate <= limit || limit <= 0 {
		return 0
	}
	d := min(time.Duration((rate-limit)/limit*float64(span)), quotaWindow).Round(time.Millisecond)
	m.metrics.connections.Inc()
	m.metrics.connectionSeconds.Add(d.Seconds())
	return d
}

func ipEntityKey(ip *string) string {
	return controller.ClientQuotaEntity{{Type: controller.QuotaEntityIP, Name: ip}}.Key()
}
