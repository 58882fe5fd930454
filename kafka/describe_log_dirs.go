package kafka

// DescribeLogDirs, v1-v5 (kafka-log-dirs).
//
// Behaviour:
//   - Answers this broker's log directory (<data_dir>/topics, the only
//     one) with the replicas the request names (null: all of them): each
//     one's size on disk and its offset lag behind the high watermark this
//     broker knows (broker/log_dirs.go); named partitions this broker holds
//     no replica of are left out, as in Kafka. No replica is ever "future"
//     (weir moves no replica between directories) or cordoned. v4+ carry
//     the file system's total and usable bytes.
//   - Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//     (top level from v3; no directories before), as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeLogDirs(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	auth := c.authorizer()
	if !auth.cluster(kmsg.ACLOperationDescribe) {
		if req.Version >= 3 {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	var wanted func(string, int32) bool
	if req.Topics != nil {
		named := map[string]map[int32]bool{}
		for _, rt := range req.Topics {
			if named[rt.Topic] == nil {
				named[rt.Topic] = map[int32]bool{}
			}
			for _, p := range rt.Partitions {
				named[rt.Topic][p] = true
			}
		}
		wanted = func(topic string, partition int32) bool { return named[topic][partition] }
	}
	for _, d := range s.operations.LogDirs(wanted) {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir, rd.TotalBytes, rd.UsableBytes = d.Path, d.TotalBytes, d.UsableBytes
		for _, r := range d.Replicas {
			if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != r.Topic {
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = r.Topic
				rd.Topics = append(rd.Topics, rt)
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag = r.Partition, r.Size, r.OffsetLag
			rt := &rd.Topics[len(rd.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp, nil
}
