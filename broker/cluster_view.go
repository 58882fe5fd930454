package broker

import (
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/weir-broker/weir/broker/controller"
)

// BrokerInfo is a live broker as Metadata shows it.
type BrokerInfo struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
	// listeners are every listener's address (see On); Host and Port
	// are the first's.
	listeners []controller.ListenerEndpoint
}

// PartitionInfo is one partition as Metadata shows it.
type PartitionInfo struct {
	Partition   int32
	Leader      int32 // -1 when the leader is not live
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32 // the live in-sync replicas, as the leader reported them
	Offline     []int32
}

// ClusterView is the cluster as this broker's copy of the controller's
// state shows it: the brokers, where they listen, the controller, and
// each partition's leader, replicas and ISR. The Broker composes it, and
// the protocol layer's Metadata, DescribeCluster and leader hints read
// it.
type ClusterView struct {
	self int32
	view func() *controller.View
	// controller names the controller group's leader ("" when none).
	controller func() (id, addr string)
}

func newClusterView(self int32, view func() *controller.View, controller func() (id, addr string)) ClusterView {
	return ClusterView{self: self, view: view, controller: controller}
}

func brokerInfo(r controller.BrokerRegistration) BrokerInfo {
	host, portStr, _ := net.SplitHostPort(r.KafkaAddr)
	port, _ := strconv.Atoi(portStr)
	return BrokerInfo{NodeID: r.NodeID, Host: host, Port: int32(port), Rack: r.Rack, listeners: r.Listeners}
}

// LiveBrokers lists the brokers whose registration is live, by node id.
func (c *ClusterView) LiveBrokers() []BrokerInfo {
	var out []BrokerInfo
	for _, r := range c.view().LiveBrokers(time.Now()) {
		out = append(out, brokerInfo(r))
	}
	return out
}

// ClusterBroker is a registered broker as the admin API lists it.
type ClusterBroker struct {
	NodeID    int32
	KafkaAddr string
	Listeners []ListenerAddr
	AdminAddr string
	Rack      string
	Alive     bool
}

// ClusterBrokers lists every registered broker, live or not, by node id.
func (c *ClusterView) ClusterBrokers() []ClusterBroker {
	v := c.view()
	now := time.Now()
	var out []ClusterBroker
	for _, r := range v.Brokers() {
		out = append(out, ClusterBroker{NodeID: r.NodeID, KafkaAddr: r.KafkaAddr, Listeners: listenerAddrs(r.Listeners),
			AdminAddr: r.AdminAddr, Rack: r.Rack, Alive: v.Live(r.NodeID, now)})
	}
	return out
}

// Broker returns a live broker's address.
func (c *ClusterView) Broker(id int32) (BrokerInfo, bool) {
	v := c.view()
	r, ok := v.Broker(id)
	if !ok || !v.Live(id, time.Now()) {
		return BrokerInfo{}, false
	}
	return brokerInfo(r), true
}

// ControllerID is the node id of the controller group's leader, or -1.
func (c *ClusterView) ControllerID() int32 {
	id, _ := c.controller()
	if id == "" {
		return -1
	}
	n, err := strconv.Atoi(id)
	if err != nil {
		return -1
	}
	return int32(n)
}

// PartitionInfos describes every partition of a topic from the
// controller's view, whichever broker hosts it.
func (c *ClusterView) PartitionInfos(t *Topic) []PartitionInfo {
	v := c.view()
	ct := v.TopicByID(t.ID())
	if ct == nil {
		return nil
	}
	now := time.Now()
	out := make([]PartitionInfo, len(ct.Partitions))
	for i, p := range ct.Partitions {
		info := PartitionInfo{Partition: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: slices.Clone(p.Replicas)}
		for _, r := range p.Replicas {
			live := v.Live(r, now)
			if !live {
				info.Offline = append(info.Offline, r)
			}
			// Until the leader reports its ISR, the live replicas.
			if live && (p.ISR == nil || slices.Contains(p.ISR, r)) {
				info.ISR = append(info.ISR, r)
			}
		}
		if info.Leader >= 0 && !v.Live(info.Leader, now) {
			info.Leader = -1
		}
		out[i] = info
	}
	return out
}

// LeaderHint names a partition's leader as the controller knows it, for
// NOT_LEADER_OR_FOLLOWER answers that carry the new leader (KIP-951).
func (c *ClusterView) LeaderHint(t *Topic, partition int32) (leader BrokerInfo, epoch int32, ok bool) {
	v := c.view()
	cp, ok := v.Partition(t.ID(), partition)
	if !ok {
		return BrokerInfo{}, -1, false
	}
	if cp.LeaderTerm == 0 || cp.Leader < 0 || cp.Leader == c.self {
		return BrokerInfo{}, -1, false
	}
	info, ok := c.Broker(cp.Leader)
	return info, cp.LeaderEpoch, ok
}
