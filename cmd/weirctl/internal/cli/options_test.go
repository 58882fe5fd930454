package cli

import (
	"strings"
	"testing"
)

func TestParseBrokers(t *testing.T) {
	got, err := parseBrokers(" a:1, b:2,,c:3 ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "a:1|b:2|c:3" {
		t.Fatalf("got %q", got)
	}
	if _, err := parseBrokers(" , "); err == nil {
		t.Fatal("want error for empty list")
	}
	if _, err := parseBrokers("localhost"); err == nil {
		t.Fatal("want error for missing port")
	}
}
