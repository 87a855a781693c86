package optim

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"train/internal/near"
	"train/model"
)

// TestAdam follows torch.optim.Adam and AdamW by hand for two steps of one
// parameter (lr 0.1, betas 0.9/0.999, eps 1e-8, weight decay 0.5).
func TestAdam(t *testing.T) {
	for _, tc := range []struct {
		name string
		want float64
	}{{"adam", 0}, {"adamw", 0}} {
		o, err := New(Config{Name: tc.name, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.5}, 1)
		if err != nil {
			t.Fatal(err)
		}
		p := []float32{1}
		ref := 1.0
		var m, v float64
		for step, g := range []float64{0.2, -0.4} {
			tt := float64(step + 1)
			if tc.name == "adamw" {
				ref *= 1 - 0.1*0.5
			} else {
				g += 0.5 * ref
			}
			m = 0.9*m + 0.1*g
			v = 0.999*v + 0.001*g*g
			ref -= 0.1 / (1 - math.Pow(0.9, tt)) * m / (math.Sqrt(v)/math.Sqrt(1-math.Pow(0.999, tt)) + 1e-8)
			o.Step(p, []float32{float32([]float64{0.2, -0.4}[step])}, 0.1, step+1)
		}
		if !near.Close(ref, float64(p[0]), 4*6e-8, 0) { // 4 float32 ulps
			t.Errorf("%s: %v, want %v", tc.name, p[0], ref)
		}
		if len(o.State()["exp_avg"]) != 1 || len(o.State()["exp_avg_sq"]) != 1 {
			t.Errorf("%s: state %v", tc.name, o.State())
		}
	}
	if _, err := New(Config{Name: "lamb"}, 1); err == nil {
		t.Error("unknown optimizer accepted")
	}
}

func TestClipGradNorm(t *testing.T) {
	g := []float32{3, 4}
	if n := ClipGradNorm(g, 1); n != 5 || !near.Close(0.6, float64(g[0]), 0, 1e-6) || !near.Close(0.8, float64(g[1]), 0, 1e-6) {
		t.Errorf("norm %v grads %v", n, g)
	}
	h := []float32{0.3, 0.4}
	if ClipGradNorm(h, 1); h[0] != 0.3 || h[1] != 0.4 {
		t.Errorf("clipped below the limit: %v", h)
	}
}

func TestStepSchedule(t *testing.T) {
	s := Schedule{Kind: "step", Base: 1, StepSize: 10, Gamma: 0.1, Warmup: 5}
	for step, want := range map[int64]float64{5: 1, 14: 1, 15: 0.1, 25: 0.01} {
		if got := s.At(step, 1); !near.Close(want, got, 0, 1e-12) {
			t.Errorf("At(%d) = %v, want %v", step, got, want)
		}
	}
	if (Schedule{Kind: "step"}).Validate() == nil {
		t.Error("step schedule without a step size accepted")
	}
}

// TestNonFinite: every optimizer reports a NaN or Inf gradient.
func TestNonFinite(t *testing.T) {
	for _, name := range Names {
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			o, _ := New(Config{Name: name, Momentum: 0.9, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, 3)
			if !o.Step([]float32{1, 2, 3}, []float32{0.1, 0.2, 0.3}, 0.1, 1) {
				t.Errorf("%s: finite gradients reported as not finite", name)
			}
			if o.Step([]float32{1, 2, 3}, []float32{0.1, bad, 0.3}, 0.1, 2) {
				t.Errorf("%s: gradient %v not reported", name, bad)
			}
		}
	}
}

// withThreads runs fn with the updates on the model's pool of n threads
// (as trainer sets it up), then goes back to one thread and no pool.
func withThreads(n int, fn func()) {
	procs := runtime.GOMAXPROCS(0) // SetThreads raises it
	model.SetThreads(n)
	UsePool(model.PoolRanges())
	defer func() {
		UsePool(nil)
		model.SetThreads(1)
		runtime.GOMAXPROCS(procs)
	}()
	fn()
}

// TestUpdateThreads: AdamW's, Adam's and SGD's updates cut across the
// model's pool (UsePool), over runs with and without weight decay that
// the parts' edges fall inside, give the bits of one thread, run as one
// pass of 3 units, find a NaN in any part, and allocate nothing.
func TestUpdateThreads(t *testing.T) {
	const n = 3<<20 + 5
	// Spans without decay: one inside the first part, one across the edge
	// of the first and second of 3 parts, one in the last part.
	spans := []Span{{1000, 2000}, {n/3 - 7, n/3 + 100}, {n - 50, n - 10}}
	for _, name := range []string{"adamw", "adam", "sgd"} {
		run := func(threads int, nan bool) (p []float32, ok bool, allocs float64) {
			withThreads(threads, func() {
				o, err := New(Config{Name: name, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Momentum: 0.9, WeightDecay: 0.1, NoDecay: spans}, n)
				if err != nil {
					t.Fatal(err)
				}
				var g []float32
				p, g = make([]float32, n), make([]float32, n)
				for i := range p {
					p[i], g[i] = float32(i%1000)/1000, float32(i%777)/777-0.5
				}
				if nan {
					g[n-3] = float32(math.NaN())
				}
				model.ProfilePasses(true)
				ok = o.Step(p, g, 1e-3, 1)
				passes := model.Passes()
				model.ProfilePasses(false)
				if threads > 1 && (len(passes) != 1 || passes[0].Units != threads || passes[0].Count != 1) {
					t.Errorf("%s on %d threads: passes %+v, want one of %d units", name, threads, passes, threads)
				}
				allocs = testing.AllocsPerRun(2, func() { o.Step(p, g, 1e-3, 2) })
			})
			return p, ok, allocs
		}
		one, _, _ := run(1, false)
		three, ok, allocs := run(3, false)
		if !ok {
			t.Fatalf("%s: a finite update reported non-finite", name)
		}
		if allocs != 0 {
			t.Errorf("%s: an update on 3 threads allocates %v times", name, allocs)
		}
		for i := range one {
			if math.Float32bits(one[i]) != math.Float32bits(three[i]) {
				t.Fatalf("%s: [%d]: %v on 3 threads, %v on one", name, i, three[i], one[i])
			}
		}
		if _, ok, _ := run(3, true); ok {
			t.Errorf("%s: a NaN in the last part went unnoticed on 3 threads", name)
		}
	}
}

// TestClipThreads: SumSquares over several of its blocks is the exact sum
// of squares of small integers (every association is exact below 2^53)
// and has the same bits at 1, 2 and 3 threads on random values, as one
// pass of 3 units at 3; Scale gives each value's float32 product, as one
// pass too.
func TestClipThreads(t *testing.T) {
	const n = 5<<16 + 123
	ints, rnd := make([]float32, n), make([]float32, n)
	var exact int64
	r := rand.New(rand.NewPCG(1, 2))
	for i := range ints {
		v := int64(i%2001 - 1000)
		ints[i], exact = float32(v), exact+v*v
		rnd[i] = float32(r.NormFloat64())
	}
	var sums [4]float64
	// Two blocks a pass: the 6 blocks in three passes, each pass's edges
	// inside the vector.
	sumSquaresGroup(2)
	if got := SumSquares(ints); got != float64(exact) {
		t.Errorf("two blocks a pass: sum of squares %v, want %d", got, exact)
	}
	sumSquaresGroup(0)
	for threads := 1; threads <= 3; threads++ {
		withThreads(threads, func() {
			if got := SumSquares(ints); got != float64(exact) {
				t.Errorf("%d threads: sum of squares %v, want %d", threads, got, exact)
			}
			model.ProfilePasses(true)
			sums[threads] = SumSquares(rnd)
			passes := model.Passes()
			model.ProfilePasses(false)
			if threads == 3 && (len(passes) != 1 || passes[0].Units != 3) {
				t.Errorf("SumSquares on 3 threads: passes %+v, want one of 3 units", passes)
			}
			if threads < 3 {
				return
			}
			g := slices.Clone(rnd)
			model.ProfilePasses(true)
			Scale(g, 0.3)
			passes = model.Passes()
			model.ProfilePasses(false)
			if len(passes) != 1 || passes[0].Units != 3 {
				t.Errorf("Scale on 3 threads: passes %+v, want one of 3 units", passes)
			}
			for i := range g {
				if g[i] != rnd[i]*0.3 {
					t.Fatalf("Scale: [%d] %v, want %v", i, g[i], rnd[i]*0.3)
				}
			}
		})
	}
	if math.Float64bits(sums[1]) != math.Float64bits(sums[2]) || math.Float64bits(sums[1]) != math.Float64bits(sums[3]) {
		t.Errorf("sum of squares at 1, 2, 3 threads: %v %v %v", sums[1], sums[2], sums[3])
	}
}
