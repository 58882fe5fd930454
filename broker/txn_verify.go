package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/txn"
	"github.com/weir-broker/weir/log"
)

// Produce verification (KIP-890 part 1): a partition leader accepts the
// batch that would open a producer's transaction on the partition only
// once the transactional id's coordinator confirms that the partition is
// in the producer's ongoing transaction (AddPartitionsToTxn's verify-only
// check, txn.Coordinator.VerifyPartitions). Without it, a batch that
// arrives after its transaction ended (a late retry, a client that never
// sent AddPartitionsToTxn) opens a transaction that no coordinator knows
// and no marker ever closes: the partition's last stable offset stays
// behind it and read_committed consumers stop there for good.
//
// The guard against a marker landing between the coordinator's answer
// and the append is the leader's, not the replicated state's: every
// replica applies entries in the order the leader proposed them, so all
// that matters is that no marker of the producer is proposed between the
// start of the verification and the proposal of the batch. txnGate
// serialises the proposals of transactional batches with those of
// markers; a marker proposed meanwhile moves the producer's generation
// and the verified batch is refused, as Kafka's VerificationGuard is
// cleared by a marker. A marker proposed before the verification began
// is applied before the batch, or else its transaction is not complete
// at the coordinator (it completes once its markers are applied), which
// then does not answer the partition as part of an ongoing transaction.
// A new leader serves produce only once it has applied every entry of
// earlier terms (Partition.leaderEpoch), so the markers a previous leader
// proposed are in the producer state it looks at.

// serviceTxnVerify answers a verification for a coordinator this broker
// hosts, asked by a partition leader elsewhere.
const serviceTxnVerify = "txn.verify"

// txnVerifyTimeout bounds one verification, within the produce
// request's own timeout.
const txnVerifyTimeout = 10 * time.Second

// errVerificationGuardLost refuses a verified batch whose producer had a
// marker proposed since the verification began.
var errVerificationGuardLost = errors.New("a transaction marker for the producer was written since the partition was verified with the coordinator")

// txnGate is a partition leader's side of produce verification.
type txnGate struct {
	// mu orders the proposals of transactional batches with those of
	// markers.
	mu sync.Mutex
	// verifying counts each producer's verifications under way, by mu;
	// gen is moved by every marker proposed for a producer while one is,
	// by mu. Both forget a producer with its last verification, so
	// nothing stays behind for producers that are gone.
	verifying map[int64]int
	gen       map[int64]uint64
	// markersInFlight counts each producer's markers proposed here and
	// not yet applied, by Partition.appendMu: until they are, the
	// applied producer state still shows a transaction they end.
	markersInFlight map[int64]int
}

// txnOngoing reports whether producer pid at epoch has a transaction
// open on the partition that no marker proposed here is about to end: a
// batch of it needs no verification.
func (p *Partition) txnOngoing(pid int64, epoch int16) bool {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	e := p.producers.m[pid]
	return e != nil && e.epoch == epoch && e.txnFirst >= 0 && p.txnGate.markersInFlight[pid] == 0
}

// proposeTxnBatch proposes a transactional batch of producer pid at
// epoch. When it would open the producer's transaction here, verify asks
// the coordinator first, and the batch is refused if verify does or if a
// marker of the producer was proposed meanwhile. asked says whether
// verify ran.
func (p *Partition) proposeTxnBatch(ctx context.Context, pid int64, epoch int16, entry []byte, verify func(context.Context) error) (pe proposedEntry, asked bool, err error) {
	g := &p.txnGate
	g.mu.Lock()
	if p.txnOngoing(pid, epoch) {
		defer g.mu.Unlock()
		pe, err = p.propose(ctx, entry)
		return pe, false, err
	}
	if g.verifying == nil {
		g.verifying, g.gen = map[int64]int{}, map[int64]uint64{}
	}
	g.verifying[pid]++
	start := g.gen[pid]
	g.mu.Unlock()

	verr := verify(ctx)

	g.mu.Lock()
	defer g.mu.Unlock()
	lost := g.gen[pid] != start
	if g.verifying[pid]--; g.verifying[pid] == 0 {
		delete(g.verifying, pid)
		delete(g.gen, pid)
	}
	switch {
	case verr != nil:
		return proposedEntry{}, true, verr
	case lost:
		return proposedEntry{}, true, fmt.Errorf("%w: %s/%d: producer %d: %w", kerr.InvalidTxnState, p.topic.Name(), p.Index, pid, errVerificationGuardLost)
	}
	pe, err = p.propose(ctx, entry)
	return pe, true, err
}

// proposeMarker proposes a transaction marker of producer pid, voiding
// the producer's verifications under way.
func (p *Partition) proposeMarker(ctx context.Context, pid int64, entry []byte) (proposedEntry, error) {
	g := &p.txnGate
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.verifying[pid] > 0 {
		g.gen[pid]++
	}
	p.appendMu.Lock()
	if g.markersInFlight == nil {
		g.markersInFlight = map[int64]int{}
	}
	g.markersInFlight[pid]++
	p.appendMu.Unlock()
	pe, err := p.propose(ctx, entry)
	if err != nil {
		p.appendMu.Lock()
		p.markerSettled(pid)
		p.appendMu.Unlock()
	}
	return pe, err
}

// markerSettled counts off a marker of pid proposed here: it is applied,
// or was never proposed. p.appendMu is held. A marker proposed here that
// never commits (the leadership was lost) stays counted until a later
// one of the producer is applied, which only costs its batches a
// verification each meanwhile.
func (p *Partition) markerSettled(pid int64) {
	m := p.txnGate.markersInFlight
	switch n := m[pid]; {
	case n > 1:
		m[pid] = n - 1
	case n == 1:
		delete(m, pid)
	}
}

// txnVerifier asks a transactional id's coordinator whether a partition
// is in the producer's ongoing transaction: in process when this broker
// hosts the coordinator, else over serviceTxnVerify.
type txnVerifier struct {
	self int32
	// coordinator is the transaction coordinator once
	// __transaction_state exists.
	coordinator func() (*txn.Coordinator, bool)
	// coordinatorNode is the broker leading partition i of
	// __transaction_state and its RPC address.
	coordinatorNode func(i int32) (node int32, rpcAddr string, err error)
	call            func(ctx context.Context, addr, service string, data []byte) ([]byte, error)
}

// txnVerifyRequest is serviceTxnVerify's request: one producer's
// partitions.
type txnVerifyRequest struct {
	TransactionalID string               `json:"transactional_id"`
	ProducerID      int64                `json:"producer_id"`
	ProducerEpoch   int16                `json:"producer_epoch"`
	Partitions      []txn.TopicPartition `json:"partitions"`
}

// txnVerifyResponse is its answer: a code for the whole request, or one
// per partition in the request's order.
type txnVerifyResponse struct {
	Code  int16   `json:"code"`
	Codes []int16 `json:"codes,omitempty"`
}

// verify answers for one partition with the coordinator's code (0: it is
// in the ongoing transaction).
func (v txnVerifier) verify(ctx context.Context, id string, pid int64, epoch int16, tp txn.TopicPartition) int16 {
	c, ok := v.coordinator()
	if !ok {
		return kerr.CoordinatorNotAvailable.Code
	}
	node, addr, err := v.coordinatorNode(c.Partition(id))
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	req := txnVerifyRequest{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: []txn.TopicPartition{tp}}
	var resp txnVerifyResponse
	if node == v.self {
		resp = verifyAt(c, req)
	} else {
		data, _ := json.Marshal(req) // plain values: cannot fail
		out, err := v.call(ctx, addr, serviceTxnVerify, data)
		if err != nil {
			return kerr.NetworkException.Code
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			return kerr.NetworkException.Code
		}
	}
	if resp.Code != 0 {
		return resp.Code
	}
	if len(resp.Codes) != 1 {
		return kerr.NetworkException.Code
	}
	return resp.Codes[0]
}

// verifyAt answers a verification at the coordinator c, with the check
// AddPartitionsToTxn's verify-only form makes.
func verifyAt(c *txn.Coordinator, req txnVerifyRequest) txnVerifyResponse {
	if c == nil {
		return txnVerifyResponse{Code: kerr.CoordinatorNotAvailable.Code}
	}
	codes, code := c.VerifyPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Partitions)
	if code != 0 {
		return txnVerifyResponse{Code: code}
	}
	out := txnVerifyResponse{Codes: make([]int16, len(req.Partitions))}
	for i, tp := range req.Partitions {
		out.Codes[i] = codes[tp]
	}
	return out
}

// serveTxnVerify answers serviceTxnVerify.
func (b *Broker) serveTxnVerify(_ context.Context, _ string, data []byte) ([]byte, error) {
	var req txnVerifyRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	c, _ := b.ExistingTransactions()
	return json.Marshal(verifyAt(c, req))
}

// newTxnVerifier is the broker's verifier.
func (b *Broker) newTxnVerifier() txnVerifier {
	return txnVerifier{
		self:        b.node.NodeID,
		coordinator: b.ExistingTransactions,
		coordinatorNode: func(i int32) (int32, string, error) {
			bi, err := b.leaderOf(TxnTopic, i)
			if err != nil {
				return -1, "", err
			}
			reg, ok := b.ctrl.state.View().Broker(bi.NodeID)
			if !ok {
				return -1, "", fmt.Errorf("broker %d is not registered", bi.NodeID)
			}
			return bi.NodeID, reg.RPCAddr, nil
		},
		call: func(ctx context.Context, addr, service string, data []byte) ([]byte, error) {
			return b.ctrl.mux.Call(ctx, addr, service, data)
		},
	}
}

// verificationError is the produce error for a coordinator's answer, as
// Kafka's leaders give it (AddPartitionsToTxnManager, ReplicaManager):
// TRANSACTION_ABORTABLE only to Produce v11+, which knows it, else
// INVALID_TXN_STATE; PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, which
// produce answers for a stale epoch; and whatever only means "ask again"
// (the coordinator moving, loading, unreachable, or still writing the
// previous transaction's markers) as NOT_ENOUGH_REPLICAS, which every
// client retries without looking for a new leader.
func verificationError(code, produceVersion int16) error {
	const unverified = "unable to verify the partition has been added to the transaction"
	switch code {
	case 0:
		return nil
	case kerr.TransactionAbortable.Code:
		if produceVersion >= 11 {
			return fmt.Errorf("%w: partition was not added to the transaction", kerr.TransactionAbortable)
		}
		return fmt.Errorf("%w: partition was not added to the transaction", kerr.InvalidTxnState)
	case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code:
		return fmt.Errorf("%w: the coordinator has a newer epoch for the producer", kerr.InvalidProducerEpoch)
	case kerr.ClusterAuthorizationFailed.Code:
		return fmt.Errorf("%w: partition was not added to the transaction", kerr.InvalidTxnState)
	case kerr.ConcurrentTransactions.Code, kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return fmt.Errorf("%w: %s; underlying error: %s", kerr.NotEnoughReplicas, unverified, kerr.ErrorForCode(code))
	}
	return fmt.Errorf("%w: %s", kerr.ErrorForCode(code), unverified)
}

// verifyResults counts produce verifications by result
// (weir_txn_produce_verifications_total).
type verifyResults struct {
	vec                                                        *prometheus.CounterVec
	verified, notInTxn, fenced, retriable, guardLost, otherErr prometheus.Counter
}

func newVerifyResults() *verifyResults {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_txn_produce_verifications_total",
		Help: "Transactional produce batches a partition leader verified with the transaction coordinator (KIP-890), by result."}, []string{"result"})
	return &verifyResults{vec: vec,
		verified: vec.WithLabelValues("verified"), notInTxn: vec.WithLabelValues("not_in_transaction"),
		fenced: vec.WithLabelValues("fenced"), retriable: vec.WithLabelValues("retriable"),
		guardLost: vec.WithLabelValues("marker_raced"), otherErr: vec.WithLabelValues("error")}
}

// count records one verification: the coordinator's code and what became
// of the batch.
func (r *verifyResults) count(code int16, err error) {
	switch {
	case code == 0 && errors.Is(err, errVerificationGuardLost):
		r.guardLost.Inc()
	case code == 0:
		r.verified.Inc()
	case code == kerr.TransactionAbortable.Code:
		r.notInTxn.Inc()
	case code == kerr.ProducerFenced.Code || code == kerr.InvalidProducerEpoch.Code || code == kerr.InvalidProducerIDMapping.Code:
		r.fenced.Inc()
	case errors.Is(err, kerr.NotEnoughReplicas):
		r.retriable.Inc()
	default:
		r.otherErr.Inc()
	}
}

// proposeTxnBatch proposes a transactional batch, verified with its
// coordinator first when it would open the producer's transaction on p.
func (pp *ProducePath) proposeTxnBatch(ctx context.Context, p *Partition, h log.BatchHeader, entry []byte, opts ProduceOptions) (proposedEntry, error) {
	code := int16(0)
	verify := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
		defer cancel()
		code = pp.verifyTxn(ctx, opts.TransactionalID, h.ProducerID, h.ProducerEpoch, txn.TopicPartition{Topic: p.topic.Name(), Partition: p.Index})
		return verificationError(code, opts.Version)
	}
	pe, asked, err := p.proposeTxnBatch(ctx, h.ProducerID, h.ProducerEpoch, entry, verify)
	if asked && pp.verifications != nil {
		pp.verifications.count(code, err)
	}
	return pe, err
}

// registerVerifyMetrics reports produce verifications.
func (b *Broker) registerVerifyMetrics() {
	if b.registerer == nil || b.verifications == nil {
		return
	}
	if err := b.registerer.Register(b.verifications.vec); err != nil {
		b.logger.Warn("registering produce verification metrics", "err", err)
	}
}
