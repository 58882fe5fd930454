package kafka

// ListTransactions, v0-v2 (KIP-664, kafka-transactions list).
//
// Behaviour: the transactions of the __transaction_state partitions this
// broker's coordinator serves, filtered by state, producer id, how long
// they have been open (v1, KIP-994) and an id pattern (v2: a regular
// expression; one that does not compile is INVALID_REQUEST). Unknown
// state names are echoed in unknown_state_filters, as Kafka does. Only
// ids the principal may DESCRIBE are listed. Before __transaction_state
// exists the list is empty, and listing does not create it.

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker/txn"
)

func (s *Server) handleListTransactions(c *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	filter := txn.ListFilter{ProducerIDs: req.ProducerIDFilters, MinDurationMs: req.DurationFilterMillis}
	for _, name := range req.StateFilters {
		st, err := kmsg.ParseTransactionState(name)
		if err != nil {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		filter.States = append(filter.States, st)
	}
	if len(req.StateFilters) > 0 && len(filter.States) == 0 {
		return resp, nil // only unknown states: nothing can match
	}
	if p := req.TransactionalIDPattern; p != nil && *p != "" {
		re, err := regexp.Compile(*p)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		}
		filter.IDPattern = re
	}
	coord, exists := s.txns.ExistingTransactions()
	if !exists {
		return resp, nil
	}
	auth := c.authorizer()
	for _, tx := range coord.List(filter) {
		if !auth.allowedQuietly(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, tx.ID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = tx.ID, tx.ProducerID, tx.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
