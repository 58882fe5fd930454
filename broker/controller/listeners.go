package controller

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ListenerEndpoint is one of a broker's Kafka listeners as clients reach
// it (an endpoint of Kafka's RegisterBrokerRecord). A request answers
// with the addresses of the listener it arrived on, so a client on an
// internal listener is never sent to an external address.
type ListenerEndpoint struct {
	// Name is the listener's name; names compare case-insensitively, as
	// Kafka upper-cases them.
	Name string `json:"name"`
	// Addr is the advertised host:port.
	Addr string `json:"addr"`
	// SecurityProtocol is Kafka's security.protocol of the listener
	// (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), for operators.
	SecurityProtocol string `json:"security_protocol,omitempty"`
}

// Endpoint is the advertised host:port of the broker's listener called
// name. A registration from before named listeners has only KafkaAddr,
// which it serves under any name: refusing it would hide the broker from
// every client until it registers again.
func (b BrokerRegistration) Endpoint(name string) (string, bool) {
	if len(b.Listeners) == 0 {
		return b.KafkaAddr, b.KafkaAddr != ""
	}
	for _, l := range b.Listeners {
		if strings.EqualFold(l.Name, name) {
			return l.Addr, true
		}
	}
	return "", false
}

// registerBrokerV1 is RegisterBroker before listeners: its one Kafka
// address is KafkaAddr.
type registerBrokerV1 struct {
	NodeID      int32         `json:"node_id"`
	Incarnation IncarnationID `json:"incarnation"`
	KafkaAddr   string        `json:"kafka_addr"`
	RPCAddr     string        `json:"rpc_addr"`
	Rack        string        `json:"rack,omitempty"`
	AdminAddr   string        `json:"admin_addr,omitempty"`
	ClusterID   string        `json:"cluster_id,omitempty"`
}

func decodeRegisterBroker(ver uint8, body []byte) (Command, error) {
	if ver >= 2 {
		var c RegisterBroker
		if err := strictJSON(body, &c); err != nil {
			return nil, err
		}
		return c, nil
	}
	var v1 registerBrokerV1
	if err := strictJSON(body, &v1); err != nil {
		return nil, err
	}
	return RegisterBroker{NodeID: v1.NodeID, Incarnation: v1.Incarnation, KafkaAddr: v1.KafkaAddr, RPCAddr: v1.RPCAddr,
		Rack: v1.Rack, AdminAddr: v1.AdminAddr, ClusterID: v1.ClusterID}, nil
}

// checkListeners refuses endpoints clients could not use, or two
// listeners Kafka would take for one.
func checkListeners(nodeID int32, listeners []ListenerEndpoint) error {
	for i, l := range listeners {
		if l.Name == "" || l.Addr == "" {
			return errorf(kerr.InvalidRegistration, "node %d: listener %d has no name or no address", nodeID, i)
		}
		for _, o := range listeners[:i] {
			if strings.EqualFold(o.Name, l.Name) {
				return errorf(kerr.InvalidRegistration, "node %d: listener %q registered twice", nodeID, l.Name)
			}
		}
	}
	return nil
}
