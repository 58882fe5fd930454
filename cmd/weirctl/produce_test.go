package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestInOrderReleasesSequentially(t *testing.T) {
	var got []int
	o := newInOrder(func(r produceResult) { got = append(got, r.Line) })
	for _, i := range []int{2, 0, 3, 1, 4} {
		o.done(i, produceResult{Line: i})
	}
	if fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("got %v", got)
	}
}

func TestReadLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"a\nb\n", []string{"a", "b"}},
		{"a\r\nb", []string{"a", "b"}},
		{"a\n\nc\n", []string{"a", "", "c"}},
		{"", nil},
		{"\n", []string{""}},
	} {
		lines := make(chan []byte, 10)
		errc := make(chan error, 1)
		readLines(context.Background(), strings.NewReader(tc.in), lines, errc)
		var got []string
		for l := range lines {
			got = append(got, string(l))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestReadLinesLongLine(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	lines := make(chan []byte, 2)
	readLines(context.Background(), strings.NewReader(long+"\nshort\n"), lines, make(chan error, 1))
	if l := <-lines; len(l) != 1<<20 {
		t.Errorf("long line: got %d bytes", len(l))
	}
	if l := <-lines; string(l) != "short" {
		t.Errorf("got %q", l)
	}
}
