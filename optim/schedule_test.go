package optim

import (
	"testing"
	"train/internal/near"
)

func TestSchedule(t *testing.T) {
	c := Schedule{Kind: "cosine", Base: 0.1, Warmup: 10, Total: 110}
	for _, tc := range []struct {
		step int
		want float64
	}{
		{0, 0.01}, {4, 0.05}, {9, 0.1}, // warm-up reaches Base at its last step
		{10, 0.1},          // cosine starts at Base
		{60, 0.05},         // half way: half the rate
		{110, 0}, {500, 0}, // zero at Total and after
	} {
		if got := c.At(tc.step); !near.Close(tc.want, got, 0, 1e-12) {
			t.Errorf("cosine At(%d) = %v, want %v", tc.step, got, tc.want)
		}
	}
	k := Schedule{Kind: "constant", Base: 0.1, Total: 5}
	if k.At(0) != 0.1 || k.At(100) != 0.1 {
		t.Error("constant schedule changed")
	}
	if err := (Schedule{Kind: "linear"}).Validate(); err == nil {
		t.Error("unknown kind accepted")
	}
}
