package near

import (
	"math"
	"strings"
	"testing"
)

var (
	nan = float32(math.NaN())
	inf = float32(math.Inf(1))
)

// TestDiff: the relative difference of ordinary values is the largest
// absolute difference over the largest |want|; NaN, infinities and a
// length mismatch are infinitely far from anything.
func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		want, got []float32
		diff      float64
	}{
		{"equal", []float32{1, -2, 3}, []float32{1, -2, 3}, 0},
		{"scaled by the largest |want|", []float32{1, -4}, []float32{1.5, -4}, 0.125},
		{"zeros", []float32{0, 0}, []float32{0, 0}, 0},
		{"empty", nil, nil, 0},
		{"nonzero against zeros", []float32{0, 0}, []float32{0, 1e-20}, math.Inf(1)},
		{"NaN in got", []float32{1, 2}, []float32{1, nan}, math.Inf(1)},
		{"NaN in want", []float32{nan, 2}, []float32{1, 2}, math.Inf(1)},
		{"NaN in both", []float32{nan}, []float32{nan}, math.Inf(1)},
		{"Inf in got", []float32{1, 2}, []float32{inf, 2}, math.Inf(1)},
		{"Inf in both", []float32{-inf}, []float32{-inf}, math.Inf(1)},
		{"shorter", []float32{1, 2}, []float32{1}, math.Inf(1)},
	} {
		if got := Diff(tc.want, tc.got); got != tc.diff {
			t.Errorf("%s: Diff = %v, want %v", tc.name, got, tc.diff)
		}
	}
	if d := DiffFloor([]float64{1e-9}, []float64{2e-9}, 1e-6); d != 1e-3 {
		t.Errorf("DiffFloor with floor 1e-6: %v, want 1e-3 (1e-9 over the floor)", d)
	}
}

// TestCheck: Check passes within the tolerance (inclusive) and fails
// beyond it, on NaN and on infinities, naming the element.
func TestCheck(t *testing.T) {
	want := []float32{1, 2, 4}
	if err := Check(want, []float32{1, 2, 4.0003}, 1e-4); err != nil {
		t.Errorf("7.5e-5 relative, tolerance 1e-4: %v", err)
	}
	if err := Check(want, []float32{1, 2, 4.01}, 1e-4); err == nil || !strings.Contains(err.Error(), "element 2") {
		t.Errorf("beyond the tolerance: %v", err)
	}
	for _, bad := range [][]float32{{1, nan, 4}, {1, 2, inf}, {1, 2}} {
		if err := Check(want, bad, 1); err == nil {
			t.Errorf("%v accepted against %v with tolerance 1", bad, want)
		}
	}
	if err := Check(want, []float32{1, nan, 4}, math.Inf(1)); err == nil || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("NaN with an infinite tolerance: %v", err)
	}
}

func TestClose(t *testing.T) {
	for _, tc := range []struct {
		want, got, rel, abs float64
		ok                  bool
	}{
		{1, 1.0001, 1e-4, 0, true},
		{1, 1.0002, 1e-4, 0, false},
		{0, 1e-7, 0, 1e-6, true},
		{math.NaN(), math.NaN(), 1, 1, false},
		{1, math.NaN(), 1, 1, false},
		{math.Inf(1), math.Inf(1), 1, 1, false},
		{1, math.Inf(-1), 1, 1, false},
	} {
		if got := Close(tc.want, tc.got, tc.rel, tc.abs); got != tc.ok {
			t.Errorf("Close(%v, %v, %v, %v) = %v", tc.want, tc.got, tc.rel, tc.abs, got)
		}
	}
}
