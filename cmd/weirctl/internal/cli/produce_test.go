package cli

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseCompression(t *testing.T) {
	for _, s := range []string{"none", "gzip", "snappy", "lz4", "zstd", "ZSTD"} {
		if _, err := ParseCompression(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := ParseCompression("brotli"); err == nil {
		t.Error("brotli: want error")
	}
}

func TestParseAcks(t *testing.T) {
	for in, want := range map[string]kgo.Acks{
		"-1": kgo.AllISRAcks(), "all": kgo.AllISRAcks(),
		"1": kgo.LeaderAck(), "0": kgo.NoAck(),
	} {
		got, err := ParseAcks(in)
		if err != nil || got != want {
			t.Errorf("%s: got %v, %v", in, got, err)
		}
	}
	if _, err := ParseAcks("2"); err == nil {
		t.Error("2: want error")
	}
}
