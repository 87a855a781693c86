package optim

import (
	"testing"
	"train/internal/near"
)

// TestSchedule: one sample per step (g = 1), so positions are steps.
func TestSchedule(t *testing.T) {
	c := Schedule{Kind: "cosine", Base: 0.1, Warmup: 10, Total: 110}
	for _, tc := range []struct {
		step int64
		want float64
	}{
		{0, 0.01}, {4, 0.05}, {9, 0.1}, // warm-up reaches Base at its last step
		{10, 0.1},          // cosine starts at Base
		{60, 0.05},         // half way: half the rate
		{110, 0}, {500, 0}, // zero at Total and after
	} {
		if got := c.At(tc.step, 1); !near.Close(tc.want, got, 0, 1e-12) {
			t.Errorf("cosine At(%d) = %v, want %v", tc.step, got, tc.want)
		}
	}
	k := Schedule{Kind: "constant", Base: 0.1, Total: 5}
	if k.At(0, 1) != 0.1 || k.At(100, 1) != 0.1 {
		t.Error("constant schedule changed")
	}
	if err := (Schedule{Kind: "linear"}).Validate(); err == nil {
		t.Error("unknown kind accepted")
	}
}

// TestScheduleSamples: the rate follows the sample position whatever the
// batch. Planned at 64 samples per step, a warm-up of 10 steps (640
// samples) ends at step 10 with 64 per step and at step 5 with 128; the
// cosine over 100 steps (6400 samples) is at half its rate at sample 3520
// whichever batch reaches it; and at Batch samples per step the rates are
// those of the per-step schedule, bit for bit.
func TestScheduleSamples(t *testing.T) {
	c := Schedule{Kind: "cosine", Base: 0.1, Warmup: 10, Total: 100, Batch: 64}
	for _, tc := range []struct {
		p, g int64
		want float64
	}{
		{0, 64, 0.01}, {576, 64, 0.1}, {0, 128, 0.02}, {512, 128, 0.1}, {32, 32, 0.01},
		{3520, 64, 0.05}, {3520, 128, 0.05}, {6400, 256, 0},
	} {
		if got := c.At(tc.p, tc.g); !near.Close(tc.want, got, 0, 1e-12) {
			t.Errorf("At(%d, %d) = %v, want %v", tc.p, tc.g, got, tc.want)
		}
	}
	for _, kind := range []string{"cosine", "step"} {
		steps := Schedule{Kind: kind, Base: 0.1, Warmup: 10, Total: 100, StepSize: 7, Gamma: 0.3}
		for _, g := range []int64{3, 64, 1000} {
			samples := steps
			samples.Batch = g
			for k := int64(0); k < 120; k++ {
				if a, b := steps.At(k, 1), samples.At(k*g, g); a != b {
					t.Fatalf("%s, %d per step, step %d: %v by steps, %v by samples", kind, g, k, a, b)
				}
			}
		}
	}
}
