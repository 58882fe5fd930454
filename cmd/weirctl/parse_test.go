package main

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseConfigs(t *testing.T) {
	got, err := parseConfigs([]string{"retention.ms=1000", "cleanup.policy=compact", "empty=", "eq=a=b"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact", "empty": "", "eq": "a=b"}
	if len(got) != len(want) {
		t.Fatalf("got %d configs, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] == nil || *got[k] != v {
			t.Errorf("%s: got %v, want %q", k, got[k], v)
		}
	}
	for _, bad := range [][]string{{"novalue"}, {"=x"}, {"a=1", "a=2"}} {
		if _, err := parseConfigs(bad); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
	if got, err := parseConfigs(nil); err != nil || got != nil {
		t.Fatalf("nil input: got %v, %v", got, err)
	}
}

func TestValidateCreateCounts(t *testing.T) {
	ok := [][2]int{{-1, -1}, {1, 1}, {12, 3}}
	for _, c := range ok {
		if err := validateCreateCounts(int32(c[0]), int16(c[1])); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
	bad := [][2]int{{0, 1}, {-2, 1}, {1, 0}, {1, -3}}
	for _, c := range bad {
		if err := validateCreateCounts(int32(c[0]), int16(c[1])); err == nil {
			t.Errorf("%v: want error", c)
		}
	}
}

func TestParseIsolation(t *testing.T) {
	if l, err := parseIsolation("read_committed"); err != nil || l != kgo.ReadCommitted() {
		t.Errorf("read_committed: %v %v", l, err)
	}
	if l, err := parseIsolation("read_uncommitted"); err != nil || l != kgo.ReadUncommitted() {
		t.Errorf("read_uncommitted: %v %v", l, err)
	}
	if _, err := parseIsolation("snapshot"); err == nil {
		t.Error("snapshot: want error")
	}
}
