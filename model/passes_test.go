package model

import (
	"testing"
)

// TestPassProfile: the pass profile counts every pass under its task and
// unit count, times it, keeps the caller's wait inside the pass's time,
// counts a product made in one call as t_gemm_rows of one unit, and
// records nothing once off. (The tasks' names come from the executable's
// symbol table, which `go test` strips: e2e's TestBenchStep checks them
// on the built binary.)
func TestPassProfile(t *testing.T) {
	defer SetThreads(1)
	defer ProfilePasses(false)
	if got := SetThreads(2); got != 2 {
		t.Fatalf("SetThreads(2) gave %d threads", got)
	}
	ProfilePasses(true)
	if bad := poolCheck(40, 4, 7); bad != 0 { // passes of 1, 2, 3, 4, 1, ... units
		t.Fatalf("%d units did not run exactly once", bad)
	}
	a, b, c := make([]float32, 512*256), make([]float32, 256*256), make([]float32, 512*256)
	sgemm(false, false, 8, 8, 8, 1, a, 256, b, 256, 0, c, 256)       // one call
	sgemm(false, false, 512, 256, 256, 1, a, 256, b, 256, 0, c, 256) // 4 parts of 128 rows at 2 threads
	passes := Passes()
	byUnits := map[int][]Pass{}
	for _, p := range passes {
		byUnits[p.Units] = append(byUnits[p.Units], p)
		if p.Total <= 0 || p.Wait < 0 || p.Wait > p.Total {
			t.Errorf("%+v: want 0 <= wait <= total, total > 0", p)
		}
	}
	// poolCheck's task, 10 passes of each of 1 to 4 units; the products'
	// task at 1 and 4 units: 6 kinds, two tasks.
	if len(passes) != 6 {
		t.Fatalf("%d kinds of pass, want 6: %+v", len(passes), passes)
	}
	if len(byUnits[2]) != 1 {
		t.Fatalf("passes of 2 units: %+v, want poolCheck's alone", byUnits[2])
	}
	check, gemm := byUnits[2][0].Task, ""
	for units := 1; units <= 4; units++ {
		for _, p := range byUnits[units] {
			switch {
			case p.Task == check && p.Count == 10:
			case (units == 1 || units == 4) && p.Count == 1 && (gemm == "" || gemm == p.Task) && p.Task != check:
				gemm = p.Task
			default:
				t.Errorf("%+v: not one of poolCheck's 10 passes of %d units, nor a product", p, units)
			}
		}
	}
	// One unit runs on the caller alone: nothing to wait for. The caller
	// takes its own units first, so it waits less than the whole pass.
	for _, p := range byUnits[1] {
		if p.Wait != 0 {
			t.Errorf("%+v: waited with no other thread", p)
		}
	}
	for _, p := range byUnits[4] {
		if p.Wait >= p.Total {
			t.Errorf("%+v: waited the whole pass: the caller's own units not counted", p)
		}
	}
	ProfilePasses(false)
	poolCheck(5, 3, 1)
	if p := Passes(); len(p) != 0 {
		t.Errorf("off, the profile still holds %+v", p)
	}
}
