package kafka

// OffsetCommit, v2-v9.
//
// Behaviour:
//   - Members commit with their generation; generation -1 with no member
//     id is a standalone consumer or an admin tool, allowed only while the
//     group has no members (else UNKNOWN_MEMBER_ID), and creates the group
//     if needed.
//   - Offsets are written to __consumer_offsets before the answer. Per
//     partition: UNKNOWN_TOPIC_OR_PARTITION for partitions that do not
//     exist, OFFSET_METADATA_TOO_LARGE above 4096 bytes of metadata.
//   - Group errors, per partition: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
//     REBALANCE_IN_PROGRESS (while the assignment is being synced),
//     FENCED_INSTANCE_ID. A commit during PreparingRebalance from the
//     current generation is accepted, so consumers commit before
//     rejoining.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleOffsetCommit(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	return s.broker.Groups().OffsetCommit(kreq.(*kmsg.OffsetCommitRequest)), nil
}
