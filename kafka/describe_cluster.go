package kafka

// DescribeCluster, v0-v2.
//
// Behaviour:
//   - Lists the live brokers, the cluster id and the controller (the
//     controller group's leader). Only the broker endpoint
//     type (1) is served; asking for controllers (2) is
//     UNSUPPORTED_ENDPOINT_TYPE, as on a Kafka broker.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeCluster(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp, nil
	}
	resp.EndpointType = 1
	resp.ClusterID = s.broker.ClusterID()
	resp.ControllerID = s.broker.ControllerID()
	for _, e := range s.liveBrokers() {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = e.NodeID, e.Host, e.Port, e.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
