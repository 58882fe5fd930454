package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
)

// TestReadingTransactionsCreatesNothing: DescribeTransactions and
// ListTransactions on a cluster no transactional client has used answer
// NOT_COORDINATOR and an empty list, and leave __transaction_state
// uncreated, as Kafka does; FindCoordinator for a transactional id is
// what creates it.
func TestReadingTransactionsCreatesNothing(t *testing.T) {
	_, b, addr := startServer(t)
	c := dial(t, addr)

	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = []string{"app"}
	states := c.roundTrip(describe).(*kmsg.DescribeTransactionsResponse).TransactionStates
	codeIs(t, "describe before any transaction", states[0].ErrorCode, kerr.NotCoordinator)

	list := kmsg.NewPtrListTransactionsRequest()
	listed := c.roundTrip(list).(*kmsg.ListTransactionsResponse)
	if listed.ErrorCode != 0 || len(listed.TransactionStates) != 0 {
		t.Fatalf("list before any transaction: code %d, %d transactions", listed.ErrorCode, len(listed.TransactionStates))
	}
	if b.Topic(broker.TxnTopic) != nil {
		t.Fatalf("%s created by reading transactions", broker.TxnTopic)
	}

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.SetVersion(4)
	find.CoordinatorType, find.CoordinatorKeys = 1, []string{"app"}
	c.roundTrip(find)
	if b.Topic(broker.TxnTopic) == nil {
		t.Fatalf("%s not created by FindCoordinator for a transactional id", broker.TxnTopic)
	}
}
