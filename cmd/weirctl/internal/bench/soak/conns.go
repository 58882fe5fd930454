package soak

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

const (
	soakClientID = "weirctl-bench-soak"

	// Versions the raw connections speak: current, flexible, and (for
	// Fetch and Metadata) still naming topics rather than topic IDs.
	soakApiVersionsVersion = 3
	soakMetadataVersion    = 12
	soakListOffsetsVersion = 7
	soakFetchVersion       = 12

	// soakConnMinBytes is the raw connections' Fetch min_bytes (and
	// max_bytes): more than a partition receives in a long poll at any
	// sensible --rate, so the broker holds every poll for its max_wait,
	// as it holds an idle consumer's, whatever is appended meanwhile.
	soakConnMinBytes = 1 << 20

	// soakMetadataEvery is how many long polls a raw connection makes
	// between Metadata requests, as a client refreshes its metadata.
	soakMetadataEvery = 6

	// soakMaxResponse bounds a response a raw connection reads: its
	// Fetch answers hold at most one batch.
	soakMaxResponse = 64 << 20

	// soakDialers bounds how many raw connections dial at once, so that
	// opening thousands does not overflow the broker's accept queue.
	soakDialers = 64

	// soakRetryPause is the least wait before a raw connection that
	// failed dials again, doubling up to soakRetryPauseMax.
	soakRetryPause    = 100 * time.Millisecond
	soakRetryPauseMax = 5 * time.Second
)

// errLeaderMoved ends a raw connection's session so that it connects to
// its partition's new leader.
var errLeaderMoved = errors.New("the partition's leader moved")

// soakConnStats are the raw connections' counters.
type soakConnStats struct {
	open     atomic.Int64
	opened   atomic.Int64
	churned  atomic.Int64
	moved    atomic.Int64
	requests atomic.Int64
}

// soakTarget is where a raw connection long-polls: a partition, and the
// broker that leads it.
type soakTarget struct {
	topic     string
	partition int32
	leader    int32
	addr      string
}

// soakRawConn is one slot of --connections: it keeps a connection open
// to its partition's leader, opening a new one when the churner closes
// it or it fails.
type soakRawConn struct {
	id     int
	target soakTarget

	mu       sync.Mutex
	conn     net.Conn
	churning bool
	closed   bool

	// up is called once, when the first session is ready or failed.
	up func()
}

// attach makes conn the slot's connection; false when the slot is shut.
func (c *soakRawConn) attach(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.conn, c.churning = conn, false
	return true
}

// detach closes the slot's connection and reports whether the churner
// had closed it.
func (c *soakRawConn) detach() (churned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	return c.churning
}

// churn closes the connection under its session, with an RST rather
// than a FIN when reset is true; false when there was none to close.
func (c *soakRawConn) churn(reset bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.churning || c.closed {
		return false
	}
	c.churning = true
	if tc, ok := c.conn.(*net.TCPConn); ok && reset {
		// Discard unsent data and send RST on close.
		_ = tc.SetLinger(0)
	}
	c.conn.Close()
	return true
}

// shut closes the slot for good.
func (c *soakRawConn) shut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.conn != nil {
		c.conn.Close()
	}
}

// soakConns holds the raw connections.
type soakConns struct {
	b       *soakBench
	slots   []*soakRawConn
	stats   soakConnStats
	errs    *soakErrors
	dialers chan struct{}
	wg      sync.WaitGroup
	// stop ends the slots' goroutines, including one pausing after a
	// failure or dialing.
	stop context.CancelFunc
}

// newSoakConns spreads n slots round-robin over targets.
func newSoakConns(b *soakBench, targets []soakTarget, n int, errs *soakErrors) *soakConns {
	cs := &soakConns{b: b, errs: errs, dialers: make(chan struct{}, soakDialers), stop: func() {}}
	for i := range n {
		cs.slots = append(cs.slots, &soakRawConn{id: i, target: targets[i%len(targets)]})
	}
	return cs
}

// start opens every slot's connection and returns once each first
// session is ready or failed; the slots then keep their connections
// until ctx ends or close is called.
func (cs *soakConns) start(ctx context.Context) {
	ctx, cs.stop = context.WithCancel(ctx)
	var up sync.WaitGroup
	for _, c := range cs.slots {
		up.Add(1)
		var once sync.Once
		c.up = func() { once.Do(up.Done) }
		cs.wg.Go(func() { cs.hold(ctx, c) })
	}
	up.Wait()
}

// close shuts every slot and waits for their goroutines.
func (cs *soakConns) close() {
	cs.stop()
	for _, c := range cs.slots {
		c.shut()
	}
	cs.wg.Wait()
}

// hold keeps c connected until ctx ends or c is shut. A session the
// churner ended is replaced at once; a failed one after a pause that
// doubles with each failure in a row.
func (cs *soakConns) hold(ctx context.Context, c *soakRawConn) {
	defer c.up()
	pause := time.Duration(0)
	for ctx.Err() == nil {
		err := cs.session(ctx, c)
		churned := c.detach()
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		switch {
		case ctx.Err() != nil || closed:
			return
		case churned:
			pause = 0
			continue
		case errors.Is(err, errLeaderMoved):
			cs.stats.moved.Add(1)
			pause = soakRetryPause
		default:
			cs.errs.add(fmt.Errorf("connection %d (%s/%d on broker %d): %w", c.id, c.target.topic, c.target.partition, c.target.leader, err))
			pause = min(max(2*pause, soakRetryPause), soakRetryPauseMax)
		}
		c.up()
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// session connects and long-polls until the connection fails or is
// closed: ApiVersions, Metadata and ListOffsets, then Fetch at the
// partition's end, again and again, with Metadata every few polls.
func (cs *soakConns) session(ctx context.Context, c *soakRawConn) error {
	timeout := cs.b.g.Timeout
	select {
	case cs.dialers <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", c.target.addr)
	<-cs.dialers
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", c.target.addr, err)
	}
	if !c.attach(conn) {
		conn.Close()
		return net.ErrClosed
	}
	cs.stats.opened.Add(1)
	cs.stats.open.Add(1)
	defer cs.stats.open.Add(-1)

	w := &soakWire{conn: conn, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(soakClientID)), timeout: timeout, requests: &cs.stats.requests}
	if err := w.apiVersions(); err != nil {
		return err
	}
	if err := w.checkLeader(&c.target); err != nil {
		return err
	}
	offset, err := w.endOffset(c.target)
	if err != nil {
		return err
	}
	c.up()
	wait := cs.b.o.connWait
	for round := 1; ; round++ {
		if round%soakMetadataEvery == 0 {
			if err := w.checkLeader(&c.target); err != nil {
				return err
			}
		}
		hwm, code, err := w.longPoll(c.target, offset, wait)
		if err != nil {
			return err
		}
		switch code {
		case 0:
			offset = max(offset, hwm)
		case kerr.OffsetOutOfRange.Code:
			if offset, err = w.endOffset(c.target); err != nil {
				return err
			}
		case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code,
			kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code:
			if err := w.checkLeader(&c.target); err != nil {
				return err
			}
			return fmt.Errorf("Fetch: %s, although Metadata names this broker the leader", cli.StatusCell(kerr.ErrorForCode(code), ""))
		default:
			return fmt.Errorf("Fetch: %s", cli.StatusCell(kerr.ErrorForCode(code), ""))
		}
	}
}

// churn closes --churn raw connections a second, picked at random, by
// turns with FIN and RST, until ctx ends.
func (cs *soakConns) churn(ctx context.Context, perSecond float64) {
	if perSecond <= 0 || len(cs.slots) == 0 {
		return
	}
	tick := time.NewTicker(max(time.Duration(float64(time.Second)/perSecond), time.Microsecond))
	defer tick.Stop()
	reset := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if cs.slots[rand.IntN(len(cs.slots))].churn(reset) {
				cs.stats.churned.Add(1)
				reset = !reset
			}
		}
	}
}

// soakWire is one raw connection's request/response exchange.
type soakWire struct {
	conn      net.Conn
	formatter *kmsg.RequestFormatter
	corr      int32
	buf       []byte
	timeout   time.Duration
	requests  *atomic.Int64
}

// roundTrip sends req and reads its response into resp; the read may
// take wait longer than --timeout (a long poll).
func (w *soakWire) roundTrip(req kmsg.Request, resp kmsg.Response, wait time.Duration) error {
	name := kmsg.NameForKey(req.Key())
	w.corr++
	w.buf = w.formatter.AppendRequest(w.buf[:0], req, w.corr)
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	if _, err := w.conn.Write(w.buf); err != nil {
		return fmt.Errorf("sending %s: %w", name, err)
	}
	w.requests.Add(1)
	if err := w.conn.SetReadDeadline(time.Now().Add(wait + w.timeout)); err != nil {
		return err
	}
	body, err := w.readFrame()
	if err != nil {
		return fmt.Errorf("reading the %s response: %w", name, err)
	}
	return decodeSoakResponse(req, resp, w.corr, body)
}

// readFrame reads one size-prefixed response into the wire's buffer.
func (w *soakWire) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(w.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > soakMaxResponse {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	// The request in the buffer was sent; the response reuses it.
	if cap(w.buf) < int(n) {
		w.buf = make([]byte, n)
	}
	w.buf = w.buf[:n]
	if _, err := io.ReadFull(w.conn, w.buf); err != nil {
		return nil, harness.NoEOF(err)
	}
	return w.buf, nil
}

// decodeSoakResponse checks a response frame's correlation ID and reads
// its body into resp. Flexible responses have tagged fields in their
// header, except ApiVersions', which a client must read before it knows
// what the broker speaks.
func decodeSoakResponse(req kmsg.Request, resp kmsg.Response, corr int32, frame []byte) error {
	r := kbin.Reader{Src: frame}
	if got := r.Int32(); got != corr {
		return fmt.Errorf("response to request %d where %d was due", got, corr)
	}
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%s response header: %w", kmsg.NameForKey(req.Key()), err)
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		return fmt.Errorf("decoding the %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

func (w *soakWire) apiVersions() error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = soakApiVersionsVersion
	req.ClientSoftwareName = soakClientID
	req.ClientSoftwareVersion = "1"
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := w.roundTrip(req, resp, 0); err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions: %s", cli.StatusCell(kerr.ErrorForCode(resp.ErrorCode), ""))
	}
	return nil
}

// checkLeader asks Metadata for the target's topic and returns
// errLeaderMoved, after updating t, when another broker now leads the
// partition.
func (w *soakWire) checkLeader(t *soakTarget) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = soakMetadataVersion
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(t.topic)
	req.Topics = append(req.Topics, mt)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	if err := w.roundTrip(req, resp, 0); err != nil {
		return err
	}
	return applyLeader(t, resp)
}

// applyLeader reads the target partition's leader from a Metadata
// response.
func applyLeader(t *soakTarget, resp *kmsg.MetadataResponse) error {
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != t.topic {
			continue
		}
		if rt.ErrorCode != 0 {
			return fmt.Errorf("Metadata for %s: %s", t.topic, cli.StatusCell(kerr.ErrorForCode(rt.ErrorCode), ""))
		}
		for _, p := range rt.Partitions {
			if p.Partition != t.partition {
				continue
			}
			switch {
			case p.ErrorCode == kerr.LeaderNotAvailable.Code || p.Leader < 0:
				return errLeaderMoved // an election is under way
			case p.ErrorCode != 0:
				return fmt.Errorf("Metadata for %s/%d: %s", t.topic, t.partition, cli.StatusCell(kerr.ErrorForCode(p.ErrorCode), ""))
			case p.Leader == t.leader:
				return nil
			}
			for _, b := range resp.Brokers {
				if b.NodeID == p.Leader {
					t.leader, t.addr = b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
					return errLeaderMoved
				}
			}
			return fmt.Errorf("Metadata for %s/%d: leader %d is not among the brokers listed", t.topic, t.partition, p.Leader)
		}
		return fmt.Errorf("Metadata for %s: no partition %d", t.topic, t.partition)
	}
	return fmt.Errorf("Metadata: topic %s missing from the answer", t.topic)
}

// endOffset asks ListOffsets for the partition's end.
func (w *soakWire) endOffset(t soakTarget) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = soakListOffsetsVersion
	req.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = t.topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition = t.partition
	lp.Timestamp = -1 // the end
	lt.Partitions = append(lt.Partitions, lp)
	req.Topics = append(req.Topics, lt)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	if err := w.roundTrip(req, resp, 0); err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets: an answer for %d topics, want 1 partition of 1", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return 0, fmt.Errorf("ListOffsets %s/%d: %s", t.topic, t.partition, cli.StatusCell(kerr.ErrorForCode(p.ErrorCode), ""))
	}
	return p.Offset, nil
}

// longPoll fetches from offset, which the broker holds for wait (see
// soakConnMinBytes); it returns the high watermark and the partition's
// error code.
func (w *soakWire) longPoll(t soakTarget, offset int64, wait time.Duration) (hwm int64, code int16, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = soakFetchVersion
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MinBytes = soakConnMinBytes
	// max_bytes no smaller than min_bytes, which a broker may otherwise
	// lower to it; partition_max_bytes of one byte keeps the answer to
	// the whole first batch KIP-74 obliges the broker to return, so a
	// poll costs little whatever arrived.
	req.MaxBytes = soakConnMinBytes
	req.SessionEpoch = -1 // no fetch session
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = t.topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = t.partition
	fp.FetchOffset = offset
	fp.PartitionMaxBytes = 1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := w.roundTrip(req, resp, wait); err != nil {
		return 0, 0, err
	}
	if resp.ErrorCode != 0 {
		return 0, 0, fmt.Errorf("Fetch: %s", cli.StatusCell(kerr.ErrorForCode(resp.ErrorCode), ""))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, 0, fmt.Errorf("Fetch: an answer for %d topics, want 1 partition of 1", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	return p.HighWatermark, p.ErrorCode, nil
}
