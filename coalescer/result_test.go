package coalescer

import "testing"

func TestReleaseCountsExactly(t *testing.T) {
	var freed freeLog
	data := []byte("abc")
	r := newResult(data, 1, 2, freed.free)
	if !r.tryAcquire() {
		t.Fatal("live result refused a reference")
	}
	r.Release()
	r.Release()
	if freed.count() != 0 {
		t.Fatal("freed with a holder left")
	}
	r.Release()
	if freed.timesFreed(data) != 1 || r.Data != nil {
		t.Fatal("last release did not free Data exactly once")
	}
	if r.tryAcquire() {
		t.Fatal("a released result came back to life")
	}
}

func TestReleaseTooOftenPanics(t *testing.T) {
	r := newResult([]byte("x"), 0, 1, nil)
	r.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("releasing a released result did not panic")
		}
	}()
	r.Release()
}

func TestFreeIsNotCalledWithNil(t *testing.T) {
	var freed freeLog
	newResult(nil, 0, 1, freed.free).Release()
	if freed.count() != 0 {
		t.Fatal("Free called with nil")
	}
}
