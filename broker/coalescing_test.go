package broker

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/weir-broker/weir/log/logtest"
)

func TestFreshUntil(t *testing.T) {
	batch := logtest.Batch{Records: 3, ValueSize: 10}.Encode() // offsets 10-12
	binary.BigEndian.PutUint64(batch, 10)
	for _, tc := range []struct {
		name string
		data []byte
		upTo int64
		want int64
	}{
		{"reached the watermark: outgrown by the next record", batch, 13, 13},
		{"stopped short of it: the same bytes whatever comes", batch, 20, math.MaxInt64},
		{"empty: bounded by the watermark", nil, 13, 13},
	} {
		if got := freshUntil(tc.data, tc.upTo); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
