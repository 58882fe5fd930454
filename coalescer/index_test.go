package coalescer

import (
	"context"
	"strconv"
	"testing"
)

func TestSlotIsOneCacheLine(t *testing.T) {
	if slotSize != 64 {
		t.Fatalf("slot is %d bytes, want 64", slotSize)
	}
	if got := len(newIndex(DefaultIndexBytes).slots); got != 8192 {
		t.Fatalf("default index has %d slots, want 8192", got)
	}
}

func TestIndexSizeRoundsDownToWholeBuckets(t *testing.T) {
	tests := []struct {
		bytes, buckets int
	}{
		{1, 1},
		{ways * slotSize, 1},
		{2*ways*slotSize - 1, 1},
		{2 * ways * slotSize, 2},
		{DefaultIndexBytes, DefaultIndexBytes / (ways * slotSize)},
	}
	for _, tt := range tests {
		x := newIndex(tt.bytes)
		if x.buckets != tt.buckets || len(x.slots) != tt.buckets*ways {
			t.Errorf("IndexBytes %d: %d buckets, %d slots; want %d buckets", tt.bytes, x.buckets, len(x.slots), tt.buckets)
		}
	}
}

// oneBucket returns a coalescer whose only shard has a single bucket, so
// every key competes for the same ways.
func oneBucket(t *testing.T) *Coalescer {
	return newEnabled(t, Options{Shards: 1, IndexBytes: ways * slotSize})
}

func keyAt(offset int64) Key {
	k := baseKey()
	k.Offset = offset
	return k
}

func TestFullBucketOfInflightReadsReadsUncached(t *testing.T) {
	c := oneBucket(t)
	held := &reader{payload: "held", hold: make(chan struct{})}
	var outs []<-chan outcome
	for i := range ways {
		outs = append(outs, readAsync(c, context.Background(), keyAt(int64(i)), 0, held.read))
	}
	waitUntil(t, "every way is in flight", func() bool { return held.calls.Load() == ways })

	extra := &reader{payload: "extra"}
	for i := 1; i <= 2; i++ {
		res := mustRead(t, c, keyAt(ways), 0, extra.read)
		if want := "extra#" + strconv.Itoa(i); string(res.Data) != want {
			t.Fatalf("uncached read %d: %q, want %q", i, res.Data, want)
		}
		res.Release()
	}
	if got, want := lookups(c.Stats()[0]), (ShardStats{Insertions: ways + 2}); got != want {
		t.Fatalf("stats = %+v, want %+v (uncached reads count as insertions)", got, want)
	}
	close(held.hold)
	for _, ch := range outs {
		o := receive(t, ch)
		if o.err != nil {
			t.Fatal(o.err)
		}
		o.res.Release()
	}
}

func TestFullBucketEvictsLeastRecentlyUsedLiveResult(t *testing.T) {
	c := oneBucket(t)
	r := &reader{payload: "r"}
	var held []*Result
	for i := range ways {
		held = append(held, mustRead(t, c, keyAt(int64(i)), 0, r.read))
	}
	// Touch key 0, leaving key 1 the least recently used.
	hit := mustRead(t, c, keyAt(0), 0, r.read)
	hit.Release()

	newcomer := mustRead(t, c, keyAt(ways), 0, r.read)
	defer newcomer.Release()
	if string(held[1].Data) != "r#2" {
		t.Fatal("eviction disturbed a holder of the evicted result")
	}
	before := r.calls.Load()
	for i := range ways {
		if i == 1 {
			continue
		}
		res := mustRead(t, c, keyAt(int64(i)), 0, r.read)
		if res != held[i] {
			t.Fatalf("key %d was evicted instead of the least recently used", i)
		}
		res.Release()
	}
	if r.calls.Load() != before {
		t.Fatal("a surviving key was read again")
	}
	again := mustRead(t, c, keyAt(1), 0, r.read)
	if again == held[1] {
		t.Fatal("the evicted result is still findable")
	}
	again.Release()
	for _, res := range held {
		res.Release()
	}
}

func TestFullBucketPrefersSlotWithoutHolders(t *testing.T) {
	c := oneBucket(t)
	r := &reader{payload: "r"}
	var held []*Result
	for i := range ways {
		held = append(held, mustRead(t, c, keyAt(int64(i)), 0, r.read))
	}
	held[5].Release()

	newcomer := mustRead(t, c, keyAt(ways), 0, r.read)
	defer newcomer.Release()
	for i := range ways {
		if i == 5 {
			continue
		}
		res := mustRead(t, c, keyAt(int64(i)), 0, r.read)
		if res != held[i] {
			t.Fatalf("key %d was evicted although key 5's slot had no holders", i)
		}
		res.Release()
		held[i].Release()
	}
	if got := c.Stats()[0].ReadyHits; got != ways-1 {
		t.Fatalf("ready hits = %d, want %d", got, ways-1)
	}
}

func TestShardOfDependsOnlyOnPartition(t *testing.T) {
	c := newEnabled(t, Options{Shards: 4})
	variants := []func(*Key){
		func(k *Key) { k.Offset = 1 << 40 },
		func(k *Key) { k.MaxBytes = 1 },
		func(k *Key) { k.Isolation = 1 },
		func(k *Key) { k.Obligatory = !k.Obligatory },
	}
	for p := range int32(64) {
		k := baseKey()
		k.Partition = p
		want := c.ShardOf(k)
		for _, mutate := range variants {
			v := k
			mutate(&v)
			if got := c.ShardOf(v); got != want {
				t.Fatalf("partition %d: variant on shard %d, want %d", p, got, want)
			}
		}
	}
	used := map[int]bool{}
	for p := range int32(64) {
		k := baseKey()
		k.Partition = p
		used[c.ShardOf(k)] = true
	}
	if len(used) != 4 {
		t.Fatalf("64 partitions used only %d of 4 shards", len(used))
	}
}
