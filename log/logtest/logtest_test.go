package logtest

import (
	"testing"

	"github.com/weir-broker/weir/log"
)

func TestEncodeValidates(t *testing.T) {
	raw := Concat(Batch{Records: 3, ValueSize: 10}.Encode(), Batch{Records: 1, Idempotent: true, ProducerID: 7, BaseSequence: 4}.Encode())
	hs, err := log.ValidateBatches(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].NumRecords != 3 || hs[0].LastOffsetDelta != 2 || hs[1].ProducerID != 7 || hs[1].BaseSequence != 4 {
		t.Fatalf("headers: %+v", hs)
	}
	if hs[0].Size()+hs[1].Size() != len(raw) {
		t.Fatalf("sizes %d+%d != %d", hs[0].Size(), hs[1].Size(), len(raw))
	}
}
