package raft

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter lets hashicorp/raft, its NetworkTransport and raft-wal log
// through weir's *slog.Logger, so Raft's messages carry the same handler,
// format and level as the rest of the broker instead of going to stderr.
//
// hclog's Trace has no slog level; it maps to slog.LevelDebug-4 so a handler
// at Debug still drops it (raft logs every heartbeat failure and pipeline
// step at Trace/Debug).
type hclogAdapter struct {
	l       *slog.Logger
	name    string
	implied []any
	peers   *peerLogLimit // nil: every line logged
}

const levelTrace = slog.LevelDebug - 4

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &hclogAdapter{l: l, name: name}
}

// newGroupHCLog is a group's logger: as newHCLog, with its complaints
// about a peer going through the node's limit.
func newGroupHCLog(l *slog.Logger, name string, peers *peerLogLimit) hclog.Logger {
	a := newHCLog(l, name).(*hclogAdapter)
	a.peers = peers
	return a
}

func toSlogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	lvl := toSlogLevel(level)
	ctx := context.Background()
	if !a.l.Enabled(ctx, lvl) {
		return
	}
	if a.peers != nil && level >= hclog.Error {
		ok, dropped := a.peers.allow(msg, args)
		if !ok {
			return
		}
		if dropped > 0 {
			args = append(args, "suppressed_since_last", dropped)
		}
	}
	args = formatArgs(args)
	if a.name != "" {
		args = append([]any{"component", a.name}, args...)
	}
	a.l.Log(ctx, lvl, msg, args...)
}

// formatArgs renders hclog.Fmt values (a format string and its operands),
// which raft uses for some fields, the way hclog would.
func formatArgs(args []any) []any {
	copied := false
	for i, a := range args {
		f, ok := a.(hclog.Format)
		if !ok || len(f) == 0 {
			continue
		}
		format, ok := f[0].(string)
		if !ok {
			continue
		}
		if !copied { // the caller's slice is not ours to change
			args, copied = append([]any(nil), args...), true
		}
		args[i] = fmt.Sprintf(format, f[1:]...)
	}
	return args
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	return a.l.Enabled(context.Background(), toSlogLevel(l))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{
		l:       a.l.With(args...),
		name:    a.name,
		implied: append(append([]any(nil), a.implied...), args...),
		peers:   a.peers,
	}
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	n := name
	if a.name != "" {
		n = a.name + "." + name
	}
	return &hclogAdapter{l: a.l, name: n, implied: a.implied, peers: a.peers}
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: a.l, name: name, implied: a.implied, peers: a.peers}
}

// SetLevel is ignored: the level belongs to the slog handler weir configured.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return stdWriter{a}
}

// stdWriter turns lines written through a *log.Logger into Info records.
type stdWriter struct{ a *hclogAdapter }

func (w stdWriter) Write(p []byte) (int, error) {
	w.a.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// peerLogLimit keeps a dead or unreachable peer from flooding the log.
// Every group with a replica there logs its own failed heartbeats,
// appends and votes, each retry: a broker down in a cluster of 3,000
// partitions made each survivor write 1,100-2,200 error lines a second, costing
// CPU when failover needs it. One limit per node lets through, per
// message and peer, one line every interval, across all groups, and the
// next one says how many it stood for. Lines that name no peer are never
// held back.
type peerLogLimit struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]*peerLogState // by message and peer
}

type peerLogState struct {
	last    time.Time
	dropped int
}

// peerLogEvery is the node's interval per message and peer.
const peerLogEvery = 5 * time.Second

func newPeerLogLimit(every time.Duration) *peerLogLimit {
	return &peerLogLimit{every: every, now: time.Now, seen: map[string]*peerLogState{}}
}

// allow reports whether a line may be logged, and how many like it were
// held back since the last one that was.
func (l *peerLogLimit) allow(msg string, args []any) (ok bool, dropped int) {
	peer, found := peerArg(args)
	if !found {
		return true, 0
	}
	key := msg + "\x00" + peer
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.seen[key]
	if st == nil {
		if len(l.seen) >= maxPeerLogKeys {
			clear(l.seen) // peers come and go with new incarnations
		}
		st = &peerLogState{}
		l.seen[key] = st
	} else if now.Sub(st.last) < l.every {
		st.dropped++
		return false, 0
	}
	st.last = now
	dropped, st.dropped = st.dropped, 0
	return true, dropped
}

// maxPeerLogKeys bounds the limit's memory: a handful of messages times
// the peers a node has had.
const maxPeerLogKeys = 1024

// peerArg is the peer a hashicorp/raft line is about: the value of its
// "peer" or "target" argument.
func peerArg(args []any) (string, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && (k == "peer" || k == "target") {
			return fmt.Sprint(args[i+1]), true
		}
	}
	return "", false
}
