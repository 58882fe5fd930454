package kafka

// DescribeTransactions, v0 (KIP-664, kafka-transactions describe).
//
// Behaviour: each transactional id's state at this broker's coordinator:
// NOT_COORDINATOR when another broker holds its partition,
// COORDINATOR_LOAD_IN_PROGRESS while it loads, TRANSACTIONAL_ID_NOT_FOUND
// for an id nobody initialised. Before __transaction_state exists every
// id is NOT_COORDINATOR, as on any broker that does not lead its
// partition: describing does not create the topic (FindCoordinator and
// InitProducerId do). DESCRIBE on the id is needed, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED for that id.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (s *Server) handleDescribeTransactions(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	auth := c.authorizer()
	coord, exists := s.txns.ExistingTransactions()
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		switch {
		case !auth.transactionalID(kmsg.ACLOperationDescribe, id):
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case !exists:
			st.ErrorCode = kerr.NotCoordinator.Code
		default:
			tx, code := coord.Describe(id)
			st.ErrorCode = code
			if code != 0 {
				break
			}
			st.State, st.TimeoutMillis, st.StartTimestamp = tx.State.String(), tx.TimeoutMs, tx.StartMs
			st.ProducerID, st.ProducerEpoch = tx.ProducerID, tx.ProducerEpoch
			byTopic := map[string][]int32{}
			for _, tp := range tx.Partitions {
				byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
			}
			for topic, ps := range byTopic {
				st.Topics = append(st.Topics, kmsg.DescribeTransactionsResponseTransactionStateTopic{Topic: topic, Partitions: ps})
			}
			sort.Slice(st.Topics, func(i, j int) bool { return st.Topics[i].Topic < st.Topics[j].Topic })
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
