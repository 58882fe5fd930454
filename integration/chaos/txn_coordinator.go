package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnIDsSpread picks one transactional id per worker, "<prefix>-<worker>"
// with a suffix drawn so that worker i's coordinator (the leader of its
// __transaction_state partition) is broker i mod brokers where the
// leaders allow it: killing one broker then hits one worker's
// coordinator, not all or none.
func txnIDsSpread(ctx context.Context, c *Cluster, prefix string, workers int) ([]string, error) {
	cl, err := kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var ids []string
	for w := range workers {
		want := int32(w % len(c.Nodes))
		var cands []string
		for k := range 40 {
			cands = append(cands, fmt.Sprintf("%s-%d-%d", prefix, w, k))
		}
		chosen := ""
		// The first FindCoordinator of key type 1 creates
		// __transaction_state; until its partitions have leaders the
		// answers are COORDINATOR_NOT_AVAILABLE.
		for try := 0; try < 60 && chosen == ""; try++ {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resps := adm.FindTxnCoordinators(rctx, cands...)
			cancel()
			answered := false
			for _, id := range cands {
				r, ok := resps[id]
				if !ok || r.Err != nil {
					continue
				}
				answered = true
				if r.NodeID == want {
					chosen = id
					break
				}
			}
			if chosen == "" && answered && try > 3 {
				chosen = cands[0] // the leaders do not allow it; any coordinator will do
			}
			if chosen == "" {
				sleepCtx(ctx, 500*time.Millisecond)
			}
		}
		if chosen == "" {
			return nil, fmt.Errorf("no transaction coordinator found for %s-%d-*", prefix, w)
		}
		ids = append(ids, chosen)
	}
	return ids, nil
}

// TxnCoordinator is the broker that coordinates transactional id id, as
// an answering broker's FindCoordinator (key type 1) names it.
func (c *Cluster) TxnCoordinator(ctx context.Context, id string) (int, error) {
	var errs []error
	for _, n := range c.answering() {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1
		req.CoordinatorKey = id
		req.CoordinatorKeys = []string{id}
		resp, err := c.Ask(ctx, n.ID, req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fr := resp.(*kmsg.FindCoordinatorResponse)
		code, node := fr.ErrorCode, fr.NodeID
		if len(fr.Coordinators) > 0 {
			code, node = fr.Coordinators[0].ErrorCode, fr.Coordinators[0].NodeID
		}
		if err := kerr.ErrorForCode(code); err != nil {
			errs = append(errs, fmt.Errorf("node %d: FindCoordinator %s: %w", n.ID, id, err))
			continue
		}
		if node < 0 || int(node) >= len(c.Nodes) {
			errs = append(errs, fmt.Errorf("node %d names coordinator %d for %s", n.ID, node, id))
			continue
		}
		return int(node), nil
	}
	if len(errs) == 0 {
		return -1, errors.New("no broker answers")
	}
	return -1, errors.Join(errs...)
}
