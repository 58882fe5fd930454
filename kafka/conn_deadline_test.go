package kafka

import (
	"net"
	"testing"
	"time"
)

// TestDeadlineRenew: after every renew the deadline is at least
// idleTimeout ahead, and it moves only when it would otherwise be less,
// so at most once per deadlineSlack on a busy connection.
func TestDeadlineRenew(t *testing.T) {
	var d deadline
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at, ok := d.renew(start)
	if !ok || !at.Equal(start.Add(idleTimeout+deadlineSlack)) {
		t.Fatalf("first renew = %v, %v; want %v, true", at, ok, start.Add(idleTimeout+deadlineSlack))
	}
	sets := 0
	for step := time.Duration(0); step <= 10*time.Second; step += 10 * time.Millisecond {
		now := start.Add(step)
		if _, ok := d.renew(now); ok {
			sets++
		}
		if ahead := d.at.Sub(now); ahead < idleTimeout || ahead > idleTimeout+deadlineSlack {
			t.Fatalf("at +%v the deadline is %v ahead; want [%v, %v]", step, ahead, idleTimeout, idleTimeout+deadlineSlack)
		}
	}
	// 10 s of requests every 10 ms: renewed once per second of slack.
	if want := int(10 * time.Second / deadlineSlack); sets < want-1 || sets > want {
		t.Fatalf("renewed %d times over 10 s; want about %d", sets, want)
	}
	// A connection idle for longer than the slack renews on its next
	// request, and only then.
	late := start.Add(time.Hour)
	if _, ok := d.renew(late); !ok || d.at.Sub(late) != idleTimeout+deadlineSlack {
		t.Fatalf("renew after an hour: deadline %v ahead, want %v", d.at.Sub(late), idleTimeout+deadlineSlack)
	}
}

// BenchmarkConnDeadline: what a request's read deadline costs on a
// loopback TCP connection, set every time as before and renewed.
func BenchmarkConnDeadline(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			var buf [1]byte
			c.Read(buf[:]) // held open until the client closes
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	b.Run("every-request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			nc.SetReadDeadline(time.Now().Add(idleTimeout))
		}
	})
	b.Run("renewed", func(b *testing.B) {
		b.ReportAllocs()
		var d deadline
		for b.Loop() {
			if t, ok := d.renew(time.Now()); ok {
				nc.SetReadDeadline(t)
			}
		}
	})
}
