package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// bruteForceTally counts an attacker's password guesses.
type bruteForceTally struct {
	attempts atomic.Int64 // guesses answered before the test ended
	refused  atomic.Int64 // answered SASL_AUTHENTICATION_FAILED, then closed
	mu       sync.Mutex
	others   []string // anything else, at most a few
}

func (b *bruteForceTally) other(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.others) < 5 {
		b.others = append(b.others, fmt.Sprintf(format, args...))
	}
}

// errInterrupted marks a guess cut short by the end of the test.
var errInterrupted = errors.New("interrupted by the end of the test")

// guessPassword makes one authentication attempt as user with a wrong
// password on a new connection, over PLAIN or SCRAM-SHA-256, the way a
// client would (SaslHandshake v1, SaslAuthenticate v2), and returns the
// final SaslAuthenticate error code and whether the broker then closed
// the connection.
func guessPassword(ctx context.Context, addr, mechanism, user, password string) (code int16, closed bool, err error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, false, err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	rc := &rawConn{c: nc, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("weir-bruteforce"))}
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		rc.corr++
		if err := rc.Write(rc.f.AppendRequest(nil, req, rc.corr)); err != nil {
			return nil, err
		}
		frame, err := rc.ReadFrame(requestTimeout)
		if err != nil {
			return nil, err
		}
		return parseResponse(req, frame, rc.corr, req.GetVersion())
	}
	authenticate := func(msg []byte) (*kmsg.SASLAuthenticateResponse, error) {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(2)
		req.SASLAuthBytes = msg
		resp, err := roundTrip(req)
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.SASLAuthenticateResponse), nil
	}

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mechanism
	resp, err := roundTrip(hs)
	if err != nil {
		return 0, false, fmt.Errorf("SaslHandshake: %w", err)
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return code, false, fmt.Errorf("SaslHandshake answered %s", errName(code))
	}
	var last *kmsg.SASLAuthenticateResponse
	switch mechanism {
	case "PLAIN":
		if last, err = authenticate([]byte("\x00" + user + "\x00" + password)); err != nil {
			return 0, false, fmt.Errorf("SaslAuthenticate: %w", err)
		}
	case "SCRAM-SHA-256":
		session, clientFirst, err := scram.Auth{User: user, Pass: password}.AsSha256Mechanism().Authenticate(ctx, addr)
		if err != nil {
			return 0, false, err
		}
		first, err := authenticate(clientFirst)
		if err != nil {
			return 0, false, fmt.Errorf("SaslAuthenticate (client-first): %w", err)
		}
		if first.ErrorCode != 0 {
			return first.ErrorCode, false, fmt.Errorf("client-first answered %s", errName(first.ErrorCode))
		}
		// The server's salt and nonce are the same for a wrong password
		// as for the right one: only the proof fails.
		_, clientFinal, err := session.Challenge(first.SASLAuthBytes)
		if err != nil {
			return 0, false, fmt.Errorf("server-first: %w", err)
		}
		if last, err = authenticate(clientFinal); err != nil {
			return 0, false, fmt.Errorf("SaslAuthenticate (client-final): %w", err)
		}
	default:
		return 0, false, fmt.Errorf("unknown mechanism %s", mechanism)
	}
	closed = rc.expectClosed(requestTimeout) == nil
	return last.ErrorCode, closed, nil
}

// TestSASLBruteForce: while attackers guess a user's password as fast as
// the broker answers, each guess on a new connection (PLAIN and
// SCRAM-SHA-256), the legitimate user keeps producing and consuming.
// Every guess must be answered SASL_AUTHENTICATION_FAILED and closed, and
// the legitimate client must finish a fixed number of round trips within
// a generous bound; the broker's 100 ms failed-authentication delay holds
// only the guessing connection.
func TestSASLBruteForce(t *testing.T) {
	const (
		roundTrips = 60
		attackers  = 6
		// Every this many round trips the legitimate client also sees
		// that guesses were answered since the last time, so the two
		// are known to have overlapped however fast either runs.
		checkpointEvery = 10
		topic           = "traffic"
	)
	sb := startSecuredBroker(t, map[string]string{"app": "app-pw"}, map[string]int32{topic: 1})
	sb.allow(t, kadm.NewACLs().Allow("User:app").Topics(topic).Operations(kadm.OpWrite, kadm.OpRead))

	attackCtx, stopAttack := context.WithCancel(context.Background())
	var tally bruteForceTally
	var attacks sync.WaitGroup
	for i := range attackers {
		attacks.Add(1)
		go func() {
			defer attacks.Done()
			mechanism := []string{"PLAIN", "SCRAM-SHA-256"}[i%2]
			for n := 0; attackCtx.Err() == nil; n++ {
				code, closed, err := guessPassword(attackCtx, sb.KafkaAddr, mechanism, "app", fmt.Sprintf("guess-%d-%d", i, n))
				if attackCtx.Err() != nil {
					return // cut short: neither refused nor let in
				}
				tally.attempts.Add(1)
				switch {
				case err != nil:
					tally.other("%s guess %d: %v", mechanism, n, err)
				case code != kerr.SaslAuthenticationFailed.Code:
					tally.other("%s guess %d answered %s", mechanism, n, errName(code))
				case !closed:
					tally.other("%s guess %d: connection left open after the refusal", mechanism, n)
				default:
					tally.refused.Add(1)
				}
			}
		}()
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopAttack()
			attacks.Wait()
		}
	}
	defer stop()

	// The attack is under way before the legitimate client starts.
	waitCtx := ctxTimeout(t, time.Minute)
	for tally.attempts.Load() < attackers && waitCtx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}

	ctx := ctxTimeout(t, 2*time.Minute)
	producer := sb.Client(t, asUser("app", "app-pw"))
	consumer := sb.Client(t, asUser("app", "app-pw"), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	checkpoint := tally.attempts.Load()
	for i := range roundTrips {
		if i > 0 && i%checkpointEvery == 0 {
			for tally.attempts.Load() == checkpoint && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			checkpoint = tally.attempts.Load()
		}
		want := fmt.Sprintf("round-trip-%d", i)
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(want)}).FirstErr(); err != nil {
			t.Fatalf("round trip %d: produce: %v (%d guesses so far)", i, err, tally.attempts.Load())
		}
		var got []string
		for len(got) == 0 {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("round trip %d: nothing consumed within the bound (%d guesses so far)", i, tally.attempts.Load())
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("round trip %d: consume: %v", i, err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("round trip %d: consumed %q, want [%s]", i, got, want)
		}
	}
	stop()

	attempts, refused := tally.attempts.Load(), tally.refused.Load()
	t.Logf("%d round trips done while %d attackers made %d guesses, %d refused", roundTrips, attackers, attempts, refused)
	if len(tally.others) > 0 {
		t.Errorf("guesses not refused as they should be: %q", tally.others)
	}
	if minimum := int64(attackers + roundTrips/checkpointEvery - 1); attempts < minimum || refused != attempts {
		t.Fatalf("%d guesses answered, %d refused; want at least %d, all refused", attempts, refused, minimum)
	}
}
