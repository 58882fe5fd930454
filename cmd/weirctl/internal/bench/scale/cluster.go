package scale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// scalePartition is what the conditions look at in one partition's
// metadata.
type scalePartition struct {
	leader   int32
	replicas int
	isr      int
	isrIDs   []int32 // shared with the Metadata answer
}

// settled: led, and every replica in sync. A partition whose replica set
// is empty is not settled: it was not really created.
func (p scalePartition) settled() bool {
	return p.leader >= 0 && p.replicas > 0 && p.isr >= p.replicas
}

// outOfISR: led, and broker b in no ISR (its replica counted out of sync,
// as after it has been down longer than the leader's lag bound or its
// session).
func (p scalePartition) outOfISR(b int32) bool {
	return p.leader >= 0 && !slices.Contains(p.isrIDs, b)
}

// scaleView is one Metadata answer reduced to what bench scale needs.
type scaleView struct {
	brokers []int32
	// topics: name → partition id → partition.
	topics map[string]map[int32]scalePartition
}

func newScaleView(m kadm.Metadata, named []string) scaleView {
	v := scaleView{topics: map[string]map[int32]scalePartition{}}
	for _, b := range m.Brokers {
		v.brokers = append(v.brokers, b.NodeID)
	}
	slices.Sort(v.brokers)
	for name, t := range m.Topics {
		if len(named) == 0 && (t.IsInternal || strings.HasPrefix(name, "__")) {
			continue
		}
		if t.Err != nil {
			// Not (yet) known to the broker answering: no partitions,
			// which the expected count turns into pending ones.
			v.topics[name] = map[int32]scalePartition{}
			continue
		}
		ps := make(map[int32]scalePartition, len(t.Partitions))
		for id, p := range t.Partitions {
			ps[id] = scalePartition{leader: p.Leader, replicas: len(p.Replicas), isr: len(p.ISR), isrIDs: p.ISR}
		}
		v.topics[name] = ps
	}
	return v
}

func (v scaleView) partitions() int {
	n := 0
	for _, ps := range v.topics {
		n += len(ps)
	}
	return n
}

// pending counts the partitions for which cond does not hold, plus those
// of the expected count that the metadata does not show yet (expected 0:
// no expectation).
func (v scaleView) pending(expected int, cond func(scalePartition) bool) int {
	n := 0
	for _, ps := range v.topics {
		for _, p := range ps {
			if !cond(p) {
				n++
			}
		}
	}
	if have := v.partitions(); expected > have {
		n += expected - have
	}
	return n
}

// leaders counts the partitions each broker leads; -1 collects the
// partitions without a leader.
func (v scaleView) leaders() map[int32]int {
	out := map[int32]int{}
	for _, ps := range v.topics {
		for _, p := range ps {
			out[max(p.leader, -1)]++
		}
	}
	return out
}

// mostLeaders is the broker leading the most partitions, the lowest id on
// a tie so that a rerun picks the same one; -1 when nothing is led.
func mostLeaders(leaders map[int32]int) (id int32, count int) {
	id = -1
	for b, n := range leaders {
		if b < 0 {
			continue
		}
		if n > count || (n == count && n > 0 && b < id) {
			id, count = b, n
		}
	}
	return id, count
}

// scalePoll is the outcome of polling until a condition holds.
type scalePoll struct {
	met        bool
	at         time.Time
	pending    int
	first      int // pending in the first answer; -1 when none came
	view       scaleView
	polls      int
	pollErrors int
	lastErr    string
}

// pollMetadata asks for metadata every interval until check returns 0
// pending or deadline passes. A failed request (a broker just killed, an
// election) is counted and retried, never fatal: what is measured is how
// long the cluster takes to answer well. At least one request is made.
func pollMetadata(ctx context.Context, g *cli.Options, adm *kadm.Client, topics []string, deadline time.Time, interval time.Duration, check func(scaleView) int) scalePoll {
	res := scalePoll{first: -1, pending: -1}
	for {
		callCtx, cancel := context.WithTimeout(ctx, min(g.Timeout, max(time.Until(deadline), interval)))
		m, err := adm.Metadata(callCtx, topics...)
		cancel()
		res.polls++
		now := time.Now()
		if err != nil {
			res.pollErrors++
			res.lastErr = err.Error()
		} else {
			res.view = newScaleView(m, topics)
			res.pending = check(res.view)
			if res.first < 0 {
				res.first = res.pending
			}
			if res.pending == 0 {
				res.met, res.at = true, now
				return res
			}
		}
		if ctx.Err() != nil || !now.Add(interval).Before(deadline) {
			return res
		}
		select {
		case <-ctx.Done():
			return res
		case <-time.After(interval):
		}
	}
}

type scaleCreateResult struct {
	Topic             string `json:"topic"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	// CreateSeconds is how long CreateTopics took to answer, error or not.
	CreateSeconds float64 `json:"create_seconds"`
	CreateError   string  `json:"create_error,omitempty"`
	Settled       bool    `json:"settled"`
	// SettleSeconds, from the request, is null when it did not settle.
	SettleSeconds        *float64      `json:"settle_seconds"`
	SettleTimeoutSeconds float64       `json:"settle_timeout_seconds"`
	Pending              int           `json:"pending"`
	Leaders              map[int32]int `json:"leaders"`
	Polls                int           `json:"polls"`
	PollErrors           int           `json:"poll_errors"`
	LastPollError        string        `json:"last_poll_error,omitempty"`
	Brokers              []int32       `json:"brokers"`
}

// pollClientOpts make every poll of pollMetadata a fresh Metadata
// request: kadm answers Metadata from the client's cache while it is
// younger than MetadataMinAge (5 s by default), which hid a failover
// that had finished for up to 5 s.
func pollClientOpts() []kgo.Opt { return []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)} }

func scaleCreate(ctx context.Context, g *cli.Options, topic string, o *scaleCreateOptions) (*scaleCreateResult, error) {
	cl, err := g.NewClient(pollClientOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(o.createTimeout.Milliseconds()))
	res := &scaleCreateResult{Topic: topic, Partitions: o.partitions, ReplicationFactor: o.replicas,
		SettleTimeoutSeconds: o.settleTimeout.Seconds()}

	// The client waits a little longer than the broker is told to, so
	// that the broker's own timeout answer is what gets reported.
	createCtx, cancel := context.WithTimeout(ctx, o.createTimeout+15*time.Second)
	start := time.Now()
	resp, err := adm.CreateTopic(createCtx, o.partitions, o.replicas, nil, topic)
	res.CreateSeconds = time.Since(start).Seconds()
	cancel()
	if err != nil {
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("topic %s already exists: bench scale create times a new topic", topic)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A broker that timed out may still be creating the
		// partitions; whether they settle is still worth knowing.
		res.CreateError = cli.StatusCell(err, resp.ErrMessage)
	}

	want := int(o.partitions)
	p := pollMetadata(ctx, g, adm, []string{topic}, start.Add(o.settleTimeout), o.interval, func(v scaleView) int {
		return v.pending(want, scalePartition.settled)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res.Settled, res.Pending = p.met, p.pending
	if p.met {
		s := p.at.Sub(start).Seconds()
		res.SettleSeconds = &s
	}
	if p.pending < 0 {
		res.Pending = want
	}
	res.Leaders = p.view.leaders()
	res.Brokers = p.view.brokers
	res.Polls, res.PollErrors, res.LastPollError = p.polls, p.pollErrors, p.lastErr
	return res, nil
}

func (r *scaleCreateResult) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, r)
	}
	t := cli.NewTable()
	t.Row("TOPIC", r.Topic)
	t.Row("PARTITIONS", r.Partitions)
	t.Row("REPLICATION FACTOR", r.ReplicationFactor)
	t.Row("CREATE SECONDS", fmt.Sprintf("%.3f", r.CreateSeconds))
	if r.CreateError != "" {
		t.Row("CREATE ERROR", r.CreateError)
	}
	t.Row("SETTLED", r.Settled)
	t.Row("SETTLE SECONDS", optSeconds(r.SettleSeconds, r.SettleTimeoutSeconds))
	t.Row("PENDING", r.Pending)
	t.Row("LEADERS", formatLeaders(r.Leaders))
	return t.Write(w)
}

type scaleWaitResult struct {
	Until  string `json:"until"`
	Broker *int32 `json:"broker,omitempty"`
	Met    bool   `json:"met"`
	// Seconds, from --since-unix-ms, is null when the condition was not
	// met in time.
	Seconds        *float64      `json:"seconds"`
	TimeoutSeconds float64       `json:"timeout_seconds"`
	Partitions     int           `json:"partitions"`
	PendingAtStart int           `json:"pending_at_start"`
	Pending        int           `json:"pending"`
	Leaders        map[int32]int `json:"leaders"`
	Polls          int           `json:"polls"`
	PollErrors     int           `json:"poll_errors"`
	LastPollError  string        `json:"last_poll_error,omitempty"`
}

func scaleWait(ctx context.Context, g *cli.Options, o *scaleWaitOptions) (*scaleWaitResult, error) {
	cl, err := g.NewClient(pollClientOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	cond := scalePartition.settled
	res := &scaleWaitResult{Until: o.until, TimeoutSeconds: o.limit.Seconds()}
	switch b := o.broker; o.until {
	case waitMoved:
		res.Broker = &b
		cond = func(p scalePartition) bool { return p.leader >= 0 && p.leader != b }
	case waitOut:
		res.Broker = &b
		cond = func(p scalePartition) bool { return p.outOfISR(b) }
	}
	p := pollMetadata(ctx, g, kadm.NewClient(cl), o.topics, o.since.Add(o.limit), o.interval, func(v scaleView) int {
		return v.pending(0, cond)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res.Met, res.Pending, res.PendingAtStart = p.met, p.pending, p.first
	if p.met {
		s := p.at.Sub(o.since).Seconds()
		res.Seconds = &s
	}
	res.Partitions = p.view.partitions()
	res.Leaders = p.view.leaders()
	res.Polls, res.PollErrors, res.LastPollError = p.polls, p.pollErrors, p.lastErr
	return res, nil
}

func (r *scaleWaitResult) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, r)
	}
	t := cli.NewTable()
	t.Row("UNTIL", r.Until)
	if r.Broker != nil {
		t.Row("BROKER", *r.Broker)
	}
	t.Row("MET", r.Met)
	t.Row("SECONDS", optSeconds(r.Seconds, r.TimeoutSeconds))
	t.Row("PARTITIONS", r.Partitions)
	t.Row("PENDING AT START", r.PendingAtStart)
	t.Row("PENDING", r.Pending)
	t.Row("LEADERS", formatLeaders(r.Leaders))
	return t.Write(w)
}

type scaleLayoutResult struct {
	Brokers          []int32       `json:"brokers"`
	Partitions       int           `json:"partitions"`
	Settled          int           `json:"settled"`
	Leaders          map[int32]int `json:"leaders"`
	MostLeaders      int32         `json:"most_leaders"`
	MostLeadersCount int           `json:"most_leaders_count"`
}

func scaleLayout(ctx context.Context, g *cli.Options, topics []string) (*scaleLayoutResult, error) {
	cl, err := g.NewClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	m, err := kadm.NewClient(cl).Metadata(mctx, topics...)
	if err != nil {
		return nil, g.DescribeCallErr("loading metadata", err)
	}
	v := newScaleView(m, topics)
	res := &scaleLayoutResult{Brokers: v.brokers, Partitions: v.partitions(), Leaders: v.leaders()}
	res.Settled = res.Partitions - v.pending(0, scalePartition.settled)
	res.MostLeaders, res.MostLeadersCount = mostLeaders(res.Leaders)
	return res, nil
}

func (r *scaleLayoutResult) write(w io.Writer, format string) error {
	if format != cli.FormatTable {
		return cli.WriteDocument(w, format, r)
	}
	t := cli.NewTable()
	t.Row("BROKERS", r.Brokers)
	t.Row("PARTITIONS", r.Partitions)
	t.Row("SETTLED", r.Settled)
	t.Row("LEADERS", formatLeaders(r.Leaders))
	t.Row("MOST LEADERS", fmt.Sprintf("broker %d (%d)", r.MostLeaders, r.MostLeadersCount))
	return t.Write(w)
}

// formatLeaders renders "0:334 1:333 2:333", brokers in id order and
// leaderless partitions as "none:N".
func formatLeaders(l map[int32]int) string {
	ids := make([]int32, 0, len(l))
	for id := range l {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmp.Compare)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		if id < 0 {
			parts = append(parts, fmt.Sprintf("none:%d", l[id]))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d:%d", id, l[id]))
	}
	return strings.Join(parts, " ")
}

// optSeconds renders a time that may not have been reached.
func optSeconds(s *float64, limit float64) string {
	if s == nil {
		return fmt.Sprintf("not within %gs", limit)
	}
	return fmt.Sprintf("%.3f", *s)
}
