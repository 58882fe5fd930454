package integration

import (
	"bytes"
	"log"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// Helpers for the sarama compatibility tests: a sarama config with bounded
// network waits, and capture of sarama's global log.

// saramaConfig is a sarama config with every network wait bounded well
// below the test's own bounds.
func saramaConfig(t testing.TB, v sarama.KafkaVersion) *sarama.Config {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "weir-sarama-compat"
	cfg.Version = v
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 15 * time.Second
	cfg.Net.WriteTimeout = 15 * time.Second
	cfg.Metadata.Retry.Max = 5
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.Timeout = 20 * time.Second
	cfg.Admin.Timeout = 10 * time.Second
	cfg.Admin.Retry.Max = 3
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 500 * time.Millisecond
	return cfg
}

// saramaLog collects sarama's global log for the duration of a test.
type saramaLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *saramaLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *saramaLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.Bytes()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return string(s)
}

func captureSaramaLog(t *testing.T) *saramaLog {
	l := &saramaLog{}
	prev := sarama.Logger
	sarama.Logger = log.New(l, "[sarama] ", log.Ltime|log.Lmicroseconds)
	t.Cleanup(func() { sarama.Logger = prev })
	return l
}
