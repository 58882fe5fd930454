package soak

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// soakErrors counts one kind of error and keeps the latest, so that a
// soak that saw errors says which.
type soakErrors struct {
	n    atomic.Int64
	mu   sync.Mutex
	last string
}

func (e *soakErrors) add(err error) {
	e.n.Add(1)
	e.mu.Lock()
	e.last = err.Error()
	e.mu.Unlock()
}

func (e *soakErrors) latest() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// soakAcks is what was acknowledged in one partition: the offsets as
// runs of consecutive offsets (one run, as a rule), so that a long soak
// keeps them exactly in little memory.
type soakAcks struct {
	mu    sync.Mutex
	runs  []harness.OffsetRange
	count int64
}

func (a *soakAcks) add(offset int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.count++
	if n := len(a.runs); n > 0 && a.runs[n-1].End == offset {
		a.runs[n-1].End++
		return
	}
	a.runs = append(a.runs, harness.OffsetRange{Start: offset, End: offset + 1})
}

// from counts the acknowledged offsets at or after next, and returns
// the first of them (-1 when there is none).
func (a *soakAcks) from(next int64) (count, first int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	first = -1
	for _, r := range a.runs {
		if r.End <= next {
			continue
		}
		s := max(r.Start, next)
		count += r.End - s
		if first < 0 || s < first {
			first = s
		}
	}
	return count, first
}

func (a *soakAcks) total() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// soakPartition is one partition the soak writes: its producer's
// sequence and what was acknowledged.
type soakPartition struct {
	topic     string
	partition int32
	// base is the end offset before the soak wrote anything; records
	// before it are not the soak's.
	base int64
	// seq is the next sequence number; only its producer touches it.
	seq  int64
	acks soakAcks
}

// soakDelivery is one group's reading of one partition. The group's
// members share it, since a rebalance moves partitions between them.
type soakDelivery struct {
	mu sync.Mutex
	// base is the partition's soakPartition.base.
	base, next int64
	// lastSeq is the sequence number of the record at next-1.
	lastSeq int64
	// first deliveries, deliveries again (after a rebalance, before a
	// commit), and records from before the soak.
	delivered, redelivered, preexisting int64
	// gapRecords are offsets skipped; seqSkips are sequence numbers
	// skipped (records the producer gave up on); backwards are records
	// whose sequence number is not above the previous one (written
	// twice, or out of order); foreign are values without the soak's
	// header.
	gapRecords, seqSkips, backwards, foreign int64
	problem                                  string
}

func newSoakDelivery(base int64) *soakDelivery {
	return &soakDelivery{base: base, next: base, lastSeq: -1}
}

// take checks a delivered record against what is due next. first is
// true for a first delivery, with the record's send time.
func (d *soakDelivery) take(offset int64, value []byte) (sent time.Time, first bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case offset < d.base:
		d.preexisting++
		return time.Time{}, false
	case offset < d.next:
		d.redelivered++
		return time.Time{}, false
	case offset > d.next:
		d.gapRecords += offset - d.next
		d.note(fmt.Sprintf("offset %d delivered where %d was due: %d offsets skipped", offset, d.next, offset-d.next))
	}
	d.next = offset + 1
	if len(value) < soakValueHeader {
		d.foreign++
		d.note(fmt.Sprintf("offset %d has a %d-byte value without the soak's header: is something else writing to the topic?", offset, len(value)))
		return time.Time{}, false
	}
	sent = time.Unix(0, int64(binary.BigEndian.Uint64(value)))
	seq := int64(binary.BigEndian.Uint64(value[8:]))
	switch {
	case seq <= d.lastSeq:
		d.backwards++
		d.note(fmt.Sprintf("offset %d holds sequence number %d after %d: written twice or out of order", offset, seq, d.lastSeq))
	case seq > d.lastSeq+1 && d.lastSeq >= 0:
		d.seqSkips += seq - d.lastSeq - 1
	}
	d.lastSeq = max(d.lastSeq, seq)
	d.delivered++
	return sent, true
}

// note keeps the first problem, which is usually the telling one.
func (d *soakDelivery) note(problem string) {
	if d.problem == "" {
		d.problem = problem
	}
}

func (d *soakDelivery) position() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.next
}

// soakGroup is one consumer group: its name and its reading of every
// partition, indexed like soakTraffic.parts.
type soakGroup struct {
	name       string
	deliveries []*soakDelivery
	// index finds a partition's position in deliveries.
	index map[string][]int
}

func (g *soakGroup) delivery(topic string, partition int32) *soakDelivery {
	idx := g.index[topic]
	if partition < 0 || int(partition) >= len(idx) || idx[partition] < 0 {
		return nil
	}
	return g.deliveries[idx[partition]]
}

// soakTraffic is the state the producers, consumers and sampler share.
type soakTraffic struct {
	parts  []*soakPartition
	groups []*soakGroup
	window soakWindow
	acked  atomic.Int64

	produceErrs, consumeErrs, connErrs soakErrors
	// unexpected counts records from partitions the soak did not create.
	unexpected atomic.Int64
}

func newSoakTraffic(parts []*soakPartition, groupNames []string) *soakTraffic {
	t := &soakTraffic{parts: parts}
	index := map[string][]int{}
	for i, p := range parts {
		idx := index[p.topic]
		for int32(len(idx)) <= p.partition {
			idx = append(idx, -1)
		}
		idx[p.partition] = i
		index[p.topic] = idx
	}
	for _, name := range groupNames {
		g := &soakGroup{name: name, index: index}
		for _, p := range parts {
			g.deliveries = append(g.deliveries, newSoakDelivery(p.base))
		}
		t.groups = append(t.groups, g)
	}
	return t
}

func (t *soakTraffic) errorTotal() int64 {
	return t.produceErrs.n.Load() + t.consumeErrs.n.Load() + t.connErrs.n.Load()
}

// behind counts the acknowledged records some group has not received.
func (t *soakTraffic) behind() int64 {
	var n int64
	for _, g := range t.groups {
		for i, p := range t.parts {
			missing, _ := p.acks.from(g.deliveries[i].position())
			n += missing
		}
	}
	return n
}

// soakProducer writes its share of the partitions at its share of the
// rate.
type soakProducer struct {
	id    int
	cl    *kgo.Client
	parts []*soakPartition
	rate  float64
}

// dealPartitions gives producer i every producers-th partition from i.
func dealPartitions(parts []*soakPartition, producers int) [][]*soakPartition {
	out := make([][]*soakPartition, producers)
	for i, p := range parts {
		out[i%producers] = append(out[i%producers], p)
	}
	return out
}

// produce sends records open loop until ctx ends: record i is due i
// intervals after the start, and a producer that fell behind catches
// up. Records go round-robin over its partitions; each value starts
// with its send time and its sequence number in the partition. recordCtx
// outlives ctx, so that records buffered when producing stops are still
// delivered (Flush waits for them).
func (p *soakProducer) produce(ctx, recordCtx context.Context, t *soakTraffic, recordSize int) {
	padding := make([]byte, recordSize-soakValueHeader)
	for i := range padding {
		padding[i] = byte('a' + rand.IntN(26))
	}
	interval := float64(time.Second) / p.rate
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	for i := int64(0); ctx.Err() == nil; i++ {
		if wait := time.Until(start.Add(time.Duration(float64(i) * interval))); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		part := p.parts[i%int64(len(p.parts))]
		// Each record needs its own value: franz-go keeps it until the
		// record is acknowledged.
		value := make([]byte, soakValueHeader, recordSize)
		binary.BigEndian.PutUint64(value, uint64(time.Now().UnixNano()))
		binary.BigEndian.PutUint64(value[8:], uint64(part.seq))
		value = append(value, padding...)
		part.seq++
		p.cl.Produce(recordCtx, &kgo.Record{Topic: part.topic, Partition: part.partition, Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				if recordCtx.Err() == nil || !errors.Is(err, context.Canceled) {
					t.produceErrs.add(fmt.Errorf("producer %d: producing to %s/%d: %s", p.id, part.topic, part.partition, cli.StatusCell(err, "")))
				}
				return
			}
			part.acks.add(r.Offset)
			t.acked.Add(1)
		})
	}
}

// soakConsumer is one member of a group.
type soakConsumer struct {
	group *soakGroup
	cl    *kgo.Client
}

// consume polls until ctx ends, checking every record and counting its
// latency.
func (c *soakConsumer) consume(ctx context.Context, t *soakTraffic) {
	var latencies []time.Duration
	for ctx.Err() == nil {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			if topic == "" {
				t.consumeErrs.add(fmt.Errorf("group %s: %s", c.group.name, cli.StatusCell(err, "")))
				return
			}
			t.consumeErrs.add(fmt.Errorf("group %s: fetching %s/%d: %s", c.group.name, topic, partition, cli.StatusCell(err, "")))
		})
		now := time.Now()
		latencies = latencies[:0]
		fetches.EachRecord(func(r *kgo.Record) {
			d := c.group.delivery(r.Topic, r.Partition)
			if d == nil {
				t.unexpected.Add(1)
				return
			}
			if sent, first := d.take(r.Offset, r.Value); first {
				latencies = append(latencies, now.Sub(sent))
			}
		})
		t.window.add(latencies)
	}
}

// soakCheck is what verification found, over every group and partition.
type soakCheck struct {
	Acknowledged int64 `json:"acknowledged_records"`
	// Delivered and Redelivered are over all groups.
	Delivered   int64 `json:"delivered_records"`
	Redelivered int64 `json:"redelivered_records"`
	// Missing are acknowledged records a group did not receive.
	Missing    int64 `json:"missing_records"`
	Skipped    int64 `json:"skipped_offsets"`
	Backwards  int64 `json:"repeated_or_reordered"`
	Foreign    int64 `json:"foreign_records"`
	Unexpected int64 `json:"unexpected_records"`
	// Unacknowledged are records delivered beyond those acknowledged:
	// written although their producer saw an error.
	Unacknowledged int64    `json:"unacknowledged_delivered"`
	SeqSkips       int64    `json:"sequence_skips"`
	Verified       bool     `json:"verified"`
	Problems       []string `json:"problems,omitempty"`
}

// soakProblemsShown bounds the problems listed per run.
const soakProblemsShown = 20

// verify checks that every group received every acknowledged record of
// every partition, in offset order, without gaps or repeats.
func (t *soakTraffic) verify() soakCheck {
	var c soakCheck
	problem := func(s string) {
		if len(c.Problems) < soakProblemsShown {
			c.Problems = append(c.Problems, s)
		}
	}
	for _, p := range t.parts {
		c.Acknowledged += p.acks.total()
	}
	for _, g := range t.groups {
		for i, p := range t.parts {
			d := g.deliveries[i]
			d.mu.Lock()
			next, delivered := d.next, d.delivered
			c.Delivered += d.delivered
			c.Redelivered += d.redelivered
			c.Skipped += d.gapRecords
			c.Backwards += d.backwards
			c.Foreign += d.foreign
			c.SeqSkips += d.seqSkips
			if d.problem != "" {
				problem(fmt.Sprintf("group %s, %s/%d: %s", g.name, p.topic, p.partition, d.problem))
			}
			d.mu.Unlock()
			missing, first := p.acks.from(next)
			if missing > 0 {
				c.Missing += missing
				problem(fmt.Sprintf("group %s, %s/%d: %d acknowledged records not received, from offset %d (received up to %d)",
					g.name, p.topic, p.partition, missing, first, next-1))
			}
			if extra := delivered - (p.acks.total() - missing); extra > 0 {
				c.Unacknowledged += extra
			}
		}
	}
	c.Unexpected = t.unexpected.Load()
	if c.Unexpected > 0 {
		problem(fmt.Sprintf("%d records came from partitions the soak did not create", c.Unexpected))
	}
	c.Verified = c.Missing == 0 && c.Skipped == 0 && c.Backwards == 0 && c.Foreign == 0 && c.Unexpected == 0
	slices.Sort(c.Problems)
	return c
}
