package controller

import (
	"crypto/rand"
	"testing"
)

func TestIncarnationIsItsString(t *testing.T) {
	var a, b IncarnationID
	rand.Read(a[:])
	rand.Read(b[:])
	if !a.Is(a.String()) || !(IncarnationID{}).Is((IncarnationID{}).String()) {
		t.Errorf("%s is not its own string", a)
	}
	for _, s := range []string{b.String(), "", a.String()[1:], a.String() + "A"} {
		if a.Is(s) {
			t.Errorf("%s Is %q", a, s)
		}
	}
	other := b.String()
	if n := testing.AllocsPerRun(100, func() { a.Is(other) }); n > 0 {
		t.Errorf("Is allocates %.0f times", n)
	}
}
