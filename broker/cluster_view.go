package broker

import (
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/weir-broker/weir/raft/controller"
)

// BrokerInfo is a live broker as Metadata shows it.
type BrokerInfo struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
}

// PartitionInfo is one partition as Metadata shows it.
type PartitionInfo struct {
	Partition   int32
	Leader      int32 // -1 when the leader is not live
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32 // the live replicas: partitions are not replicated yet
	Offline     []int32
}

func brokerInfo(r controller.BrokerRegistration) BrokerInfo {
	host, portStr, _ := net.SplitHostPort(r.KafkaAddr)
	port, _ := strconv.Atoi(portStr)
	return BrokerInfo{NodeID: r.NodeID, Host: host, Port: int32(port), Rack: r.Rack}
}

// LiveBrokers lists the brokers whose registration is live, by node id.
func (b *Broker) LiveBrokers() []BrokerInfo {
	var out []BrokerInfo
	for _, r := range b.ctrl.state.View().LiveBrokers(time.Now()) {
		out = append(out, brokerInfo(r))
	}
	return out
}

// Broker returns a live broker's address.
func (b *Broker) Broker(id int32) (BrokerInfo, bool) {
	v := b.ctrl.state.View()
	r, ok := v.Broker(id)
	if !ok || !v.Live(id, time.Now()) {
		return BrokerInfo{}, false
	}
	return brokerInfo(r), true
}

// ControllerID is the node id of the controller group's leader, or -1.
func (b *Broker) ControllerID() int32 {
	id, _ := b.ctrl.group.Leader()
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
func (b *Broker) PartitionInfos(t *Topic) []PartitionInfo {
	v := b.ctrl.state.View()
	ct := v.TopicByID(controller.TopicID(t.ID))
	if ct == nil {
		return nil
	}
	now := time.Now()
	out := make([]PartitionInfo, len(ct.Partitions))
	for i, p := range ct.Partitions {
		info := PartitionInfo{Partition: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: slices.Clone(p.Replicas)}
		for _, r := range p.Replicas {
			if v.Live(r, now) {
				info.ISR = append(info.ISR, r)
			} else {
				info.Offline = append(info.Offline, r)
			}
		}
		if info.Leader >= 0 && !v.Live(info.Leader, now) {
			info.Leader = -1
		}
		out[i] = info
	}
	return out
}
