package log

import (
	"bytes"
	"testing"
)

func TestBuildBatchRoundTrip(t *testing.T) {
	kvs := []KeyValue{{Key: []byte("k1"), Value: []byte("v1")}, {Key: []byte("k2")}, {Value: []byte{}}}
	b := BuildBatch(1234, kvs)
	hs, err := ValidateBatches(b)
	if err != nil || len(hs) != 1 || hs[0].NumRecords != 3 {
		t.Fatalf("headers %+v err %v", hs, err)
	}
	l := mustOpen(t, t.TempDir(), DefaultConfig())
	if _, err := l.Append(BuildBatch(1, []KeyValue{{Key: []byte("first")}}), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(b, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []Record
	if err := ForEachRecord(b, func(r Record) bool { got = append(got, r); return true }); err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r.Offset != int64(1+i) || r.Timestamp != 1234 || !bytes.Equal(r.Key, kvs[i].Key) || !bytes.Equal(r.Value, kvs[i].Value) {
			t.Errorf("record %d: %+v", i, r)
		}
		if (r.Key == nil) != (kvs[i].Key == nil) || (r.Value == nil) != (kvs[i].Value == nil) {
			t.Errorf("record %d: null-ness lost: %+v", i, r)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d records", len(got))
	}
}

func FuzzForEachRecord(f *testing.F) {
	f.Add(BuildBatch(1, []KeyValue{{Key: []byte("a"), Value: []byte("b")}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ForEachRecord(b, func(Record) bool { return true })
	})
}
