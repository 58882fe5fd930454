package cli

import (
	"testing"
)

func TestParseOffset(t *testing.T) {
	for _, s := range []string{"start", "end", "0", "42", "oldest", "newest"} {
		if _, err := ParseOffset(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"", "-1", "x", "1.5"} {
		if _, err := ParseOffset(s); err == nil {
			t.Errorf("%q: want error", s)
		}
	}
	got, _ := ParseOffset("42")
	if got.EpochOffset().Offset != 42 {
		t.Errorf("42 parsed as %v", got)
	}
}
