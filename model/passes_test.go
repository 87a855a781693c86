package model

import (
	"fmt"
	"testing"
	"time"
)

// TestPassProfile: the pass profile counts every pass under its task and
// unit count, times it, keeps the caller's wait inside the pass's time,
// counts a product made in one call as t_gemm_rows of one unit, times
// the caller's gaps between passes by the passes around them, and
// records nothing once off. (The tasks' names come from the executable's
// symbol table, which `go test` strips: e2e's TestBenchStep checks them
// on the built binary.)
func TestPassProfile(t *testing.T) {
	defer SetThreads(1)
	defer ProfilePasses(false)
	if got := SetThreads(5); got != 5 {
		t.Fatalf("SetThreads(5) gave %d threads", got)
	}
	ProfilePasses(true)
	if bad := poolCheck(40, 4, 7); bad != 0 { // passes of 1, 2, 3, 4, 1, ... units
		t.Fatalf("%d units did not run exactly once", bad)
	}
	a, b, c := make([]float32, 512*256), make([]float32, 256*256), make([]float32, 512*256)
	sgemm(false, false, 8, 8, 8, 1, a, 256, b, 256, 0, c, 256) // one call
	// The caller's serial work between two passes: far longer than
	// poolCheck's own pauses (0 to 300 us each) can grow under load (in a
	// fresh root's suite, ten of them summed to 38 ms against a 30 ms
	// sleep here).
	const serial = 250 * time.Millisecond
	time.Sleep(serial)
	sgemm(false, false, 512, 256, 256, 1, a, 256, b, 256, 0, c, 256) // 5 parts of 96 to 128 rows at 5 threads
	passes := Passes()
	// The gaps: 42 passes, 41 gaps between them, the sleep's the longest,
	// from the one-call product (1 unit) to the cut one (5 units).
	gaps, n := Gaps(), 0
	for _, g := range gaps {
		n += g.Count
		if g.Time < 0 || g.Count < 1 {
			t.Errorf("gap %+v: want time >= 0, count >= 1", g)
		}
	}
	if n != 41 || len(gaps) == 0 {
		t.Fatalf("%d gaps in %d places, want 41: %+v", n, len(gaps), gaps)
	}
	if g := gaps[0]; g.FromUnits != 1 || g.ToUnits != 5 || g.Count != 1 || g.Time < serial || g.From != g.To {
		t.Errorf("longest gap %+v: want the %v sleep, from the product of 1 unit to that of 5", g, serial)
	}
	if len(gaps) > 1 && gaps[1].Time >= serial {
		t.Errorf("second gap %+v: as long as the sleep", gaps[1])
	}
	byUnits := map[int][]Pass{}
	for _, p := range passes {
		byUnits[p.Units] = append(byUnits[p.Units], p)
		if p.Total <= 0 || p.Wait < 0 || p.Wait > p.Total {
			t.Errorf("%+v: want 0 <= wait <= total, total > 0", p)
		}
	}
	// poolCheck's task, 10 passes of each of 1 to 4 units; the products'
	// task at 1 and 5 units: 6 kinds, two tasks.
	if len(passes) != 6 {
		t.Fatalf("%d kinds of pass, want 6: %+v", len(passes), passes)
	}
	if len(byUnits[2]) != 1 {
		t.Fatalf("passes of 2 units: %+v, want poolCheck's alone", byUnits[2])
	}
	check, gemm := byUnits[2][0].Task, ""
	for units := 1; units <= 5; units++ {
		for _, p := range byUnits[units] {
			switch {
			case p.Task == check && p.Count == 10:
			case (units == 1 || units == 5) && p.Count == 1 && (gemm == "" || gemm == p.Task) && p.Task != check:
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
	for _, p := range byUnits[5] {
		if p.Wait >= p.Total {
			t.Errorf("%+v: waited the whole pass: the caller's own units not counted", p)
		}
	}
	ProfilePasses(false)
	poolCheck(5, 3, 1)
	if p := Passes(); len(p) != 0 {
		t.Errorf("off, the profile still holds %+v", p)
	}
	if g := Gaps(); len(g) != 0 {
		t.Errorf("off, the profile still holds gaps %+v", g)
	}
}

// TestPassThreadTimes: each thread of a pass times its own chunks. Real
// passes whose units spin a known time: the threads' summed time in their
// chunks (Busy) holds every unit's spin and fits in threads x the pass's
// time; each worker's delay to its first chunk (Late) lies within the
// pass, one per worker that took part. On one thread a pass is the
// caller's alone: Busy is its time, and no worker is late.
func TestPassThreadTimes(t *testing.T) {
	defer SetThreads(1)
	defer ProfilePasses(false)
	const units, us, passes = 12, 400.0, 3
	spin := time.Duration(passes * units / 3 * (1 + 2 + 3) * us * float64(time.Microsecond)) // every unit's spin
	for _, threads := range []int{4, 1} {
		if got := SetThreads(threads); got != threads {
			t.Fatalf("SetThreads(%d) gave %d threads", threads, got)
		}
		ProfilePasses(true)
		for range passes {
			spinPass(units, us)
		}
		ps := Passes()
		ProfilePasses(false)
		if len(ps) != 1 || ps[0].Units != units || ps[0].Count != passes {
			t.Fatalf("%d threads: profile %+v, want one entry of %d passes of %d units", threads, ps, passes, units)
		}
		p := ps[0]
		if want := passes * (threads - 1); p.Workers != want {
			t.Errorf("%d threads: %d workers over the passes, want %d", threads, p.Workers, want)
		}
		if !(p.Busy >= spin && p.Busy <= time.Duration(threads)*p.Total) {
			t.Errorf("%d threads: busy %v, want at least the units' spin %v and at most %d x the passes' %v", threads, p.Busy, spin, threads, p.Total)
		}
		if !(p.Late >= 0 && p.Late <= time.Duration(p.Workers)*p.Total) {
			t.Errorf("%d threads: late %v over %d workers, want within the passes' %v each", threads, p.Late, p.Workers, p.Total)
		}
		if threads == 1 && (p.Busy != p.Total || p.Late != 0) {
			t.Errorf("one thread: busy %v of %v, late %v: want the pass's own time, and none late", p.Busy, p.Total, p.Late)
		}
	}
}

// TestSimulateThreads: a simulated pass runs every unit once, on the
// simulated threads, each thread starting on its own share as the pool
// does, and its time at T threads lies between the bounds any schedule
// that never idles a thread while units are left must meet: at least the
// work over T and the longest unit, at most the work over T plus the
// longest unit (Graham's bound for list scheduling). A simulation that ran
// everything as one thread, or left a thread idle, fails the upper bound.
func TestSimulateThreads(t *testing.T) {
	defer SetThreads(1)
	SetThreads(2) // the simulation runs on the caller whatever the pool
	for _, c := range []struct{ units, threads int }{{8, 4}, {5, 4}, {3, 4}, {17, 16}, {40, 3}} {
		runs, who, longest, serial, span := simCheck(c.units, c.threads, 300)
		T := min(c.threads, c.units)
		for u := range runs {
			if runs[u] != 1 || who[u] < 0 || int(who[u]) >= T {
				t.Fatalf("%+v: unit %d ran %d times, last as thread %d of %d", c, u, runs[u], who[u], T)
			}
		}
		for w := range T {
			if first := w * c.units / T; int(who[first]) != w {
				t.Errorf("%+v: the first unit of thread %d's share (%d) ran as thread %d", c, w, first, who[first])
			}
		}
		// The pass's time is measured around each unit, the unit's spin
		// inside it: allow the calls' own time.
		slack := 1e-4 + 0.02*serial
		lo, hi := max(serial/float64(T), longest), serial/float64(T)+longest
		if !(span >= lo-slack && span <= hi+slack) {
			t.Errorf("%+v: %.3f ms at %d threads of %.3f ms on one (longest unit %.3f ms), want %.3f to %.3f",
				c, span*1e3, T, serial*1e3, longest*1e3, lo*1e3, hi*1e3)
		}
	}
	if got := Threads(); got != 2 {
		t.Errorf("after simulating, the pool is %d threads, want 2", got)
	}
	if bad := poolCheck(10, 4, 3); bad != 0 {
		t.Errorf("after simulating, %d units did not run exactly once", bad)
	}
}

// TestSimulatedSameBits: a convolution simulated at 16 threads takes the
// 16-thread cut (its passes run wide, as on a pool of 16) and gives the
// bits of one thread, as a real pool does (TestWinogradWide).
func TestSimulatedSameBits(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	defer SetThreads(1)
	defer SimulateThreads(0)
	run := convAtThreads(t, [6]int{4, 8, 7, 7, 64, 64}, 5)
	y1, dx1, dw1 := run(1)
	before := wideRuns()
	if err := SimulateThreads(16); err != nil {
		t.Fatal(err)
	}
	ProfilePasses(true)
	defer ProfilePasses(false)
	y16, dx16, dw16 := run(0)
	if got := wideRuns() - before; got != 3 {
		t.Errorf("%d passes ran wide simulating 16 threads, want 3", got)
	}
	var work, at time.Duration
	for _, p := range Passes() {
		if !(p.Total > 0 && p.Work >= p.Total) {
			t.Errorf("%+v: want its time at 16 threads above 0 and at most its units' time on one", p)
		}
		work, at = work+p.Work, at+p.Total
	}
	if !(at > 0 && at < work) {
		t.Errorf("simulated passes: %v on one thread, %v at 16: want 0 < at 16 < on one", work, at)
	}
	sameConvBits(t, "", "simulating 16 threads", [3][]float32{y1, dx1, dw1}, [3][]float32{y16, dx16, dw16})
}

// TestWinoWeightBlocks: the kernels' transforms are cut into blocks of
// outputs by inputs of 16, 8 or 4, enough for the threads where the
// layer has them, and a block keeps 16 floats (a cache line) along the
// dimension its writes run along until the other side is down to 4:
// two threads writing one line of the transformed kernels was what the
// 16-core machine's 12-fold transforms pointed at. Not cut finer than
// the threads need: doubling a side halved below 16 leaves too few blocks.
func TestWinoWeightBlocks(t *testing.T) {
	blocks := func(o, c, bo, bc int) int { return (o + bo - 1) / bo * ((c + bc - 1) / bc) }
	for _, along := range []bool{false, true} {
		for _, o := range []int{16, 32, 48, 64, 128, 256} {
			for _, c := range []int{16, 32, 64, 512} {
				for T := 1; T <= 64; T++ {
					bo, bc := wkCut(o, c, along, T)
					name := fmt.Sprintf("along inputs %v, %d x %d at %d threads: blocks %d x %d", along, o, c, T, bo, bc)
					for _, b := range []int{bo, bc} {
						if b != 4 && b != 8 && b != 16 {
							t.Fatalf("%s: a side not 4, 8 or 16", name)
						}
					}
					if n, most := blocks(o, c, bo, bc), blocks(o, c, 4, 4); n < min(T, most) {
						t.Errorf("%s: %d blocks for %d threads (at most %d)", name, n, T, most)
					}
					written, other := bo, bc
					if along {
						written, other = bc, bo
					}
					if written < 16 && other != 4 {
						t.Errorf("%s: the side the writes run along halved before the other", name)
					}
					if bo < 16 && blocks(o, c, 2*bo, bc) >= T || bc < 16 && blocks(o, c, bo, 2*bc) >= T {
						t.Errorf("%s: cut finer than %d threads need", name, T)
					}
				}
			}
		}
	}
}
