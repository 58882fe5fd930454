package kafka

// Client quota enforcement (KIP-13, KIP-124, KIP-219, KIP-599), per
// broker, as Kafka's ClientQuotaManager does it:
//
//   - A connection's quotas come from its user (the authenticated
//     principal's name, "ANONYMOUS" when it did not authenticate) and the
//     client id of its requests. For each quota key the first of Kafka's
//     eight entities that sets it applies: user+client-id, user+default
//     client, user, default user+client-id, default user+default client,
//     default user, client-id, default client.
//   - The level that applies decides the sensor: user+client levels count
//     per (user, client id), user levels per user, client levels per
//     client id, shared by every connection that resolves the same way
//     on this broker (so a default user quota holds each user on its
//     own, and two connections of one client id share its quota).
//   - A sensor's rate is the sum of its last quotaSamples samples of
//     quotaWindow each, over the time they span but at least
//     (quotaSamples-1) windows. After recording v, if the rate r exceeds
//     the quota q the response carries throttle_time_ms =
//     (r-q)/q × span, and the connection handles no further request
//     until that time has passed (KIP-219: the client also waits).
//   - Produce records the request's size; Fetch the record bytes of the
//     response (a throttled fetch answers with no partitions and takes
//     its bytes back, and a consumer's max_bytes is capped by what the
//     quota allows in a full span, as in Kafka; fetches from replicas
//     are never throttled). request_percentage records the handler's
//     time as a percentage of one second (see conn.go for what is
//     timed), its throttle bounded by one window, for every API with a
//     throttle_time_ms except ApiVersions and SASL.
//   - controller_mutation_rate (KIP-599) is a token bucket instead: up to
//     quotaSamples × quotaWindow × rate partition mutations, refilled at
//     rate per second; CreateTopics, CreatePartitions and DeleteTopics
//     take their partitions from it, and while it is below zero the
//     versions that know THROTTLING_QUOTA_EXCEEDED are refused, older
//     ones throttled, for -tokens/rate.
//
// Quotas change through the controller; every connection re-resolves its
// quotas at its next request once the controller index that last changed
// them moves, so a change applies at once on every broker. With no quotas
// configured the request path loads two pointers and compares an index:
// no lock, no allocation.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/broker/controller"
)

const (
	// quotaSamples and quotaWindow are Kafka's quota.window.num and
	// quota.window.size.seconds defaults.
	quotaSamples = 11
	quotaWindow  = time.Second
	// sensorIdle is how long a sensor nobody records to is kept (Kafka
	// expires quota sensors after an hour).
	sensorIdle = time.Hour
	// anonymousUser is the quota user of a connection that did not
	// authenticate.
	anonymousUser = "ANONYMOUS"
)

// quotaKind is a quota the brokers enforce.
type quotaKind uint8

const (
	quotaProduce quotaKind = iota
	quotaFetch
	quotaRequest
	quotaMutation
	numQuotaKinds
)

// key is the quota's configuration key.
func (k quotaKind) key() string {
	switch k {
	case quotaProduce:
		return controller.QuotaProducerByteRate
	case quotaFetch:
		return controller.QuotaConsumerByteRate
	case quotaRequest:
		return controller.QuotaRequestPercentage
	default:
		return controller.QuotaControllerMutationRate
	}
}

// label is the metrics' type label.
func (k quotaKind) label() string {
	switch k {
	case quotaProduce:
		return "produce"
	case quotaFetch:
		return "fetch"
	case quotaRequest:
		return "request"
	default:
		return "controller_mutation"
	}
}

// quotaSource is where the quotas come from: the controller's, through
// the broker.
type quotaSource interface {
	ClientQuotas() []controller.ClientQuota
	ClientQuotasIndex() uint64
}

// quotaManager resolves connections' quotas and keeps the sensors.
type quotaManager struct {
	source  quotaSource
	now     func() time.Time
	metrics quotaMetrics

	table   atomic.Pointer[quotaTable]
	buildMu sync.Mutex

	mu        sync.Mutex
	sensors   map[sensorKey]*rateSensor
	buckets   map[sensorKey]*tokenBucket
	lastSweep time.Time
}

// quotaTable is the quotas as of one controller index.
type quotaTable struct {
	index    uint64
	any      [numQuotaKinds]bool // some entity sets this kind
	byEntity map[string]map[string]float64
	// anyConnections: some ip entity sets connection_creation_rate
	// (quota_connections.go).
	anyConnections bool
}

type sensorKey struct {
	kind         quotaKind
	user, client string
}

func newQuotaManager(source quotaSource, now func() time.Time, m quotaMetrics) *quotaManager {
	return &quotaManager{source: source, now: now, metrics: m, sensors: map[sensorKey]*rateSensor{}, buckets: map[sensorKey]*tokenBucket{}}
}

// current returns the table for the controller's current quotas.
func (m *quotaManager) current() *quotaTable {
	index := m.source.ClientQuotasIndex()
	if t := m.table.Load(); t != nil && t.index == index {
		return t
	}
	m.buildMu.Lock()
	defer m.buildMu.Unlock()
	index = m.source.ClientQuotasIndex()
	if t := m.table.Load(); t != nil && t.index == index {
		return t
	}
	t := &quotaTable{index: index, byEntity: map[string]map[string]float64{}}
	for _, q := range m.source.ClientQuotas() {
		t.byEntity[q.Entity.Key()] = q.Values
		for k := quotaKind(0); k < numQuotaKinds; k++ {
			if _, ok := q.Values[k.key()]; ok {
				t.any[k] = true
			}
		}
		if _, ok := q.Values[controller.QuotaConnectionCreationRate]; ok {
			t.anyConnections = true
		}
	}
	m.table.Store(t)
	return t
}

// connQuotas is one connection's resolved quotas, re-resolved when the
// quotas, its client id or its authentication change.
type connQuotas struct {
	resolved      bool
	index         uint64
	clientID      string
	authenticated bool
	limit         [numQuotaKinds]float64     // 0: no quota
	sensor        [numQuotaKinds]*rateSensor // the rates; for quotaMutation, bucket
	bucket        *tokenBucket
	// mutedUntil: the connection handles no request before it.
	mutedUntil time.Time
	mute       *time.Timer
}

// quotasFor returns the connection's quotas, resolving them again if
// they may have changed; nil when no quota of any kind is configured.
func (m *quotaManager) quotasFor(c *clientConn) *connQuotas {
	if m == nil { // a server built without one, in tests
		return nil
	}
	t := m.current()
	if t.any == [numQuotaKinds]bool{} {
		return nil
	}
	q := &c.quotas
	if q.resolved && q.index == t.index && q.clientID == c.clientID && q.authenticated == c.sasl.authenticated {
		return q
	}
	q.resolved, q.index, q.clientID, q.authenticated = true, t.index, c.clientID, c.sasl.authenticated
	user := c.quotaUser()
	q.bucket = nil
	for k := quotaKind(0); k < numQuotaKinds; k++ {
		q.limit[k], q.sensor[k] = 0, nil
		if !t.any[k] {
			continue
		}
		limit, key, ok := t.resolve(k.key(), user, c.clientID)
		if !ok {
			continue
		}
		key.kind = k
		q.limit[k] = limit
		if k == quotaMutation {
			q.bucket = m.bucket(key)
		} else {
			q.sensor[k] = m.sensor(key)
		}
	}
	return q
}

// quotaUser is the user quotas know the connection by: the principal's
// name without its type.
func (c *clientConn) quotaUser() string {
	switch {
	case c.sasl.authenticated:
		return c.sasl.user
	case c.tlsPrincipal != "":
		if _, name, ok := cutPrincipal(c.tlsPrincipal); ok {
			return name
		}
		return c.tlsPrincipal
	}
	return anonymousUser
}

func cutPrincipal(p string) (typ, name string, ok bool) {
	for i := 0; i < len(p); i++ {
		if p[i] == ':' {
			return p[:i], p[i+1:], true
		}
	}
	return "", "", false
}

// resolve finds the quota for key by Kafka's precedence, and the sensor
// it is counted in.
func (t *quotaTable) resolve(key, user, client string) (float64, sensorKey, bool) {
	u, cl := &user, &client
	levels := [...]struct {
		user, client       *string
		hasUser, hasClient bool
		tagUser, tagClient bool
	}{
		{u, cl, true, true, true, true},
		{u, nil, true, true, true, true},
		{u, nil, true, false, true, false},
		{nil, cl, true, true, true, true},
		{nil, nil, true, true, true, true},
		{nil, nil, true, false, true, false},
		{nil, cl, false, true, false, true},
		{nil, nil, false, true, false, true},
	}
	for _, l := range levels {
		var e controller.ClientQuotaEntity
		if l.hasUser {
			e = append(e, controller.QuotaEntityPart{Type: controller.QuotaEntityUser, Name: l.user})
		}
		if l.hasClient {
			e = append(e, controller.QuotaEntityPart{Type: controller.QuotaEntityClientID, Name: l.client})
		}
		v, ok := t.byEntity[e.Key()][key]
		if !ok {
			continue
		}
		var sk sensorKey
		if l.tagUser {
			sk.user = user
		}
		if l.tagClient {
			sk.client = client
		}
		return v, sk, true
	}
	return 0, sensorKey{}, false
}

// sensor returns the shared sensor for key, and drops sensors idle for
// sensorIdle now and then.
func (m *quotaManager) sensor(key sensorKey) *rateSensor {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.lastSweep) > time.Minute {
		m.lastSweep = now
		for k, s := range m.sensors {
			if s.idleSince(now) > sensorIdle {
				delete(m.sensors, k)
			}
		}
		for k, b := range m.buckets {
			if b.idleSince(now) > sensorIdle {
				delete(m.buckets, k)
			}
		}
	}
	s := m.sensors[key]
	if s == nil {
		s = newRateSensor(now)
		m.sensors[key] = s
	}
	return s
}

// bucket returns the shared token bucket for key.
func (m *quotaManager) bucket(key sensorKey) *tokenBucket {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[key]
	if b == nil {
		b = &tokenBucket{}
		m.buckets[key] = b
	}
	return b
}

// record counts v against the connection's quota of kind k and returns
// the throttle time it earned, 0 within the quota.
func (m *quotaManager) record(q *connQuotas, k quotaKind, v float64, now time.Time) time.Duration {
	if q == nil || q.sensor[k] == nil {
		return 0
	}
	rate, span := q.sensor[k].record(v, now)
	limit := q.limit[k]
	if rate <= limit {
		return 0
	}
	throttle := time.Duration((rate - limit) / limit * float64(span))
	if k == quotaRequest {
		// Kafka bounds request-time throttles by one window.
		throttle = min(throttle, quotaWindow)
	}
	// throttle_time_ms is an int32.
	throttle = min(throttle, time.Duration(math.MaxInt32)*time.Millisecond)
	return throttle.Round(time.Millisecond)
}

// unrecord takes back what record counted (a throttled fetch returns no
// bytes).
func (m *quotaManager) unrecord(q *connQuotas, k quotaKind, v float64, now time.Time) {
	if q != nil && q.sensor[k] != nil {
		q.sensor[k].record(-v, now)
	}
}

// throttled counts a throttle of d given for quota kind k.
func (m *quotaManager) throttled(k quotaKind, d time.Duration) {
	m.metrics.responses[k].Inc()
	m.metrics.seconds[k].Add(d.Seconds())
}

// rateSensor is Kafka's SampledStat Rate: quotaSamples samples of
// quotaWindow, the oldest reused once the newest is full.
type rateSensor struct {
	mu      sync.Mutex
	samples [quotaSamples]sample
	current int
	last    time.Time // last record
}

type sample struct {
	start time.Time // zero: unused
	value float64
}

func newRateSensor(now time.Time) *rateSensor { return &rateSensor{last: now} }

func (s *rateSensor) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.last)
}

// record adds v and returns the rate per second and the span it was
// measured over.
func (s *rateSensor) record(v float64, now time.Time) (rate float64, span time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = now
	cur := &s.samples[s.current]
	if cur.start.IsZero() {
		cur.start = now
	} else if now.Sub(cur.start) >= quotaWindow {
		s.current = (s.current + 1) % quotaSamples
		cur = &s.samples[s.current]
		*cur = sample{start: now}
	}
	cur.value += v
	// Samples older than every window together count no more; the
	// oldest of the others starts the span.
	var total float64
	oldest := now
	for i := range s.samples {
		sm := &s.samples[i]
		if sm.start.IsZero() {
			continue
		}
		if now.Sub(sm.start) >= quotaSamples*quotaWindow {
			*sm = sample{}
			continue
		}
		total += sm.value
		if sm.start.Before(oldest) {
			oldest = sm.start
		}
	}
	span = now.Sub(oldest)
	if full := span / quotaWindow; full < quotaSamples-1 {
		span += (quotaSamples - 1 - full) * quotaWindow
	}
	return total / span.Seconds(), span
}

// quotaMetrics are the throttling counters, bound per kind.
type quotaMetrics struct {
	responses [numQuotaKinds]prometheus.Counter
	seconds   [numQuotaKinds]prometheus.Counter
	// connections over their IP's connection_creation_rate, closed
	// after connectionSeconds in all.
	connections, connectionSeconds prometheus.Counter
}

func newQuotaMetrics() (quotaMetrics, []prometheus.Collector) {
	responses := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_kafka_throttled_responses_total", Help: "Responses that carried a quota throttle time, by quota type."}, []string{"type"})
	seconds := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_kafka_quota_throttle_seconds_total", Help: "Throttle time given to clients over their quotas, by quota type."}, []string{"type"})
	var m quotaMetrics
	for k := quotaKind(0); k < numQuotaKinds; k++ {
		m.responses[k] = responses.WithLabelValues(k.label())
		m.seconds[k] = seconds.WithLabelValues(k.label())
	}
	m.connections = responses.WithLabelValues("connection")
	m.connectionSeconds = seconds.WithLabelValues("connection")
	return m, []prometheus.Collector{responses, seconds}
}

// tokenBucket is controller_mutation_rate's measure (KIP-599): a bucket
// of up to quotaSamples × quotaWindow × rate partition mutations, full at
// first, refilled at rate per second. Mutations take tokens, and may
// take it below zero; it is exceeded while below zero, for -tokens/rate.
type tokenBucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time // zero: never used, full
}

func (b *tokenBucket) idleSince(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Sub(b.last)
}

// refill brings the bucket to now; b.mu is held.
func (b *tokenBucket) refill(rate float64, now time.Time) {
	burst := rate * quotaSamples * quotaWindow.Seconds()
	if b.last.IsZero() {
		b.tokens = burst
	} else if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(burst, b.tokens+rate*elapsed.Seconds())
	}
	b.last = now
}

// take records n mutations. strict refuses them while the bucket is
// exceeded (ok false, nothing taken). throttle is how long until the
// bucket is no longer exceeded.
func (b *tokenBucket) take(n, rate float64, strict bool, now time.Time) (ok bool, throttle time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(rate, now)
	if strict && b.tokens < 0 {
		return false, tokenThrottle(b.tokens, rate)
	}
	b.tokens -= n
	return true, tokenThrottle(b.tokens, rate)
}

func tokenThrottle(tokens, rate float64) time.Duration {
	if tokens >= 0 {
		return 0
	}
	d := time.Duration(-tokens / rate * float64(time.Second))
	return min(d, time.Duration(math.MaxInt32)*time.Millisecond).Round(time.Millisecond)
}
