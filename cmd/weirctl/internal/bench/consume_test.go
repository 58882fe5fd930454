package bench

import (
	"fmt"
	"testing"
)

func TestAssignPartitions(t *testing.T) {
	for _, tc := range []struct {
		parts     []int32
		consumers int
		want      string
	}{
		{[]int32{0, 1, 2, 3, 4}, 2, "[[0 2 4] [1 3]]"},
		{[]int32{0, 1}, 5, "[[0] [1]]"},
		{[]int32{0, 1, 2}, 1, "[[0 1 2]]"},
	} {
		if got := fmt.Sprint(assignPartitions(tc.parts, tc.consumers)); got != tc.want {
			t.Errorf("%v over %d: got %s, want %s", tc.parts, tc.consumers, got, tc.want)
		}
	}
}
