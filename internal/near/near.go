// Package near compares floating-point results in tests, the one way every
// test of this project does it.
//
// A tolerance test written as `if d > tol { fail }` passes when d is NaN,
// because every comparison with NaN is false; and a NaN anywhere in a
// result makes d NaN. Here a NaN or an infinity in either operand, or
// operands of different lengths, is the largest possible difference, so
// such a result fails every tolerance.
package near

import (
	"fmt"
	"math"
)

// Float is the element type of the slices compared.
type Float interface{ ~float32 | ~float64 }

// Diff is the largest |got[i]-want[i]| relative to the largest |want[i]|:
// one scale for the whole tensor, so elements near zero are judged by the
// tensor's magnitude, not their own. It is +Inf when the lengths differ
// or any element of either is NaN or infinite; two all-zero slices differ
// by 0.
func Diff[T Float](want, got []T) float64 { return DiffFloor(want, got, 0) }

// DiffFloor is Diff with the scale at least floor, for tensors whose
// values may all be tiny (a gradient near a minimum): their differences
// are then judged against floor.
func DiffFloor[T Float](want, got []T, floor float64) float64 {
	if len(want) != len(got) {
		return math.Inf(1)
	}
	var worst, scale float64
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if !finite(w) || !finite(g) {
			return math.Inf(1)
		}
		worst = max(worst, math.Abs(g-w))
		scale = max(scale, math.Abs(w))
	}
	scale = max(scale, floor)
	if worst == 0 {
		return 0
	}
	if scale == 0 {
		return math.Inf(1)
	}
	return worst / scale
}

// Check returns nil when got is within tol of want as Diff measures it,
// and otherwise an error saying by how much and where the worst element
// is (or which element is not finite).
func Check[T Float](want, got []T, tol float64) error {
	return CheckFloor(want, got, tol, 0)
}

// CheckFloor is Check with DiffFloor's floor.
func CheckFloor[T Float](want, got []T, tol, floor float64) error {
	d := DiffFloor(want, got, floor)
	if d <= tol && !math.IsInf(d, 1) { // not even an infinite tolerance admits NaN
		return nil
	}
	if len(want) != len(got) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	worst, at := -1.0, 0
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if !finite(w) || !finite(g) {
			return fmt.Errorf("element %d is %v, want %v: not finite", i, g, w)
		}
		if e := math.Abs(g - w); e > worst {
			worst, at = e, i
		}
	}
	return fmt.Errorf("differs by %.3g relative (tolerance %.3g); worst at element %d: %v, want %v", d, tol, at, float64(got[at]), float64(want[at]))
}

// Close reports whether |got-want| <= rel*|want| + abs, and is false when
// either is NaN or infinite (so an infinite result never equals an
// infinite expectation: tests that mean to see infinity say so).
func Close(want, got, rel, abs float64) bool {
	if !finite(want) || !finite(got) {
		return false
	}
	return math.Abs(got-want) <= rel*math.Abs(want)+abs
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
