package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"train/internal/near"
	"train/openblas"
)

// TestSgemmThreadsSameBits: sgemm cut across 2, 3 and 5 threads gives
// every element the bits it has at one thread, under each OpenBLAS kernel
// set this CPU runs: the one OpenBLAS picks, and Haswell's (AVX2), whose
// results change where a product is cut (par.c's GEMM_BLOCK). Each set
// runs in a child process, since OPENBLAS_CORETYPE is read once, when
// the library loads. The shapes are taller than wide and wider than
// tall, with edges off every block, in the four transpositions, with
// beta 0 and 1, on both sides of OpenBLAS's size lines; the
// one-thread result is checked against a float64 loop, so that a product
// that is wrong the same way at every thread count fails too.
func TestSgemmThreadsSameBits(t *testing.T) {
	if os.Getenv("TRAIN_SGEMM_CHILD") == "1" {
		sgemmThreadsSameBits(t)
		return
	}
	sets := []string{""}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		sets = append(sets, "Haswell")
	} else {
		t.Logf("no AVX2 and FMA: Haswell's kernels not tried")
	}
	for _, core := range sets {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSgemmThreadsSameBits$", "-test.v")
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "OPENBLAS_CORETYPE=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		cmd.Env = append(cmd.Env, "TRAIN_SGEMM_CHILD=1")
		if core != "" {
			cmd.Env = append(cmd.Env, "OPENBLAS_CORETYPE="+core)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSgemmThreadsSameBits") {
			t.Errorf("OPENBLAS_CORETYPE=%q: %v\n%s", core, err, out)
		}
	}
}

func sgemmThreadsSameBits(t *testing.T) {
	info, err := openblas.Load("", 1)
	if err != nil {
		t.Fatalf("%v (install libopenblas0 with scripts/setup.sh)", err)
	}
	t.Logf("OpenBLAS core %s", info.Core)
	defer SetThreads(1)
	rng := rand.New(rand.NewPCG(5, 6))
	// The shape 40x4500x1000's B (4.5M floats) is large and its A small
	// beside it: par.c cuts it into column blocks (3, the last partial) at
	// every thread count, and each block's rows across the threads. The
	// last has fewer rows than PART_ROWS twice over, and multiply-adds
	// enough to be cut into parts of 24 to 36 rows anyway (PART_WORK).
	// 6150x48x200 has many rows and a small B: units of ROWCHUNK rows,
	// the last with the 6 rows past the last whole block. 64x256x784 (the
	// MLP's first layer), 100x777x300 and 90x2000x40 have too few rows to
	// cut: column blocks, one a thread, on multiples of 64 (cols_plan),
	// the last two's edges off them.
	for _, sh := range [][3]int{{1000, 300, 384}, {200, 1500, 64}, {517, 517, 40}, {97, 1100, 33}, {300, 300, 100}, {200, 200, 100}, {40, 4500, 1000}, {96, 512, 1024}, {6150, 48, 200}, {64, 256, 784}, {100, 777, 300}, {90, 2000, 40}} {
		m, n, k := sh[0], sh[1], sh[2]
		a, b := make([]float32, m*k), make([]float32, k*n)
		for i := range a {
			a[i] = rng.Float32() - 0.5
		}
		for i := range b {
			b[i] = rng.Float32() - 0.5
		}
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			ta, tb := tr[0], tr[1]
			lda, ldb := k, n
			if ta {
				lda = m
			}
			if tb {
				ldb = k
			}
			at := func(i, p int) float32 { // op(a)[i][p]
				if ta {
					return a[p*lda+i]
				}
				return a[i*lda+p]
			}
			bt := func(p, j int) float32 {
				if tb {
					return b[j*ldb+p]
				}
				return b[p*ldb+j]
			}
			// The reference in float64, over op(a) and op(b) copied out
			// first (rows of op(a), columns of op(b), each contiguous):
			// the same sums in the same order as through at and bt, without
			// two closure calls per multiply-add, which made this the
			// slowest unit test (27 s).
			opa, opbT := make([]float64, m*k), make([]float64, n*k)
			for i := range m {
				for p := range k {
					opa[i*k+p] = float64(at(i, p))
				}
			}
			for p := range k {
				for j := range n {
					opbT[j*k+p] = float64(bt(p, j))
				}
			}
			ref := make([]float64, m*n)
			for i := range m {
				ar := opa[i*k : (i+1)*k]
				for j := range n {
					br := opbT[j*k : (j+1)*k]
					var s float64
					for p, v := range ar {
						s += v * br[p]
					}
					ref[i*n+j] = s
				}
			}
			name := fmt.Sprintf("%dx%dx%d ta=%v tb=%v", m, n, k, ta, tb)
			for _, beta := range []float32{0, 1} {
				name := fmt.Sprintf("%s beta=%v", name, beta)
				var one []float32
				// Then at 2 to 4 threads with rows cut by skewed speeds
				// (par.c's cut_rows), as a rank whose threads run unequally
				// fast cuts them.
				for _, run := range []struct {
					threads int
					speeds  []float64
				}{{1, nil}, {2, nil}, {3, nil}, {4, nil}, {5, nil}, {2, []float64{1, 3}}, {2, []float64{5, 1}}, {3, []float64{0.3, 1, 2}}, {4, []float64{1, 1, 1, 9}}} {
					threads := run.threads
					SetThreads(threads)
					c := make([]float32, m*n)
					for i := range c {
						c[i] = float32(i % 7)
					}
					if run.speeds != nil {
						withGemmSpeeds(run.speeds, func() { sgemm(ta, tb, m, n, k, 1, a, lda, b, ldb, beta, c, n) })
					} else {
						sgemm(ta, tb, m, n, k, 1, a, lda, b, ldb, beta, c, n)
					}
					if one == nil {
						one = c
						want := make([]float64, m*n)
						for i := range want {
							want[i] = ref[i] + float64(beta)*float64(i%7)
						}
						if err := near.Check(want, widen(c), 1e-5); err != nil {
							t.Errorf("%s: against a float64 loop: %v", name, err)
						}
						continue
					}
					differ := 0
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(one[i]) {
							differ++
						}
					}
					if differ > 0 {
						t.Errorf("%s: %d of %d elements differ at %d threads (speeds %v) from 1", name, differ, len(c), threads, run.speeds)
					}
				}
			}
		}
	}
}

// TestSgemmPair: two products in one pass (sgemmPair, the GPT head's
// backward: dx = dy W and dW += dy^T x) give the bits of two sgemm calls
// at one thread, at 2 to 4 threads and under skewed speeds, and those
// bits are the float64 sums' within 1e-5. The pass profile shows one
// pass of both ran, with a unit for each thread's part of dx and dW's 4
// units of ROWCHUNK rows.
func TestSgemmPair(t *testing.T) {
	if _, err := openblas.Load("", 1); err != nil {
		t.Fatalf("%v (install libopenblas0 with scripts/setup.sh)", err)
	}
	defer SetThreads(1)
	const rows, vocab, c = 300, 7000, 40 // dW's 7000 rows: 4 units
	rng := rand.New(rand.NewPCG(11, 12))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = rng.Float32() - 0.5
		}
		return v
	}
	dy, w, x, dw0 := fill(rows*vocab), fill(vocab*c), fill(rows*c), fill(vocab*c)
	run := func(pair bool) (dx, dw []float32) {
		dx, dw = make([]float32, rows*c), append([]float32(nil), dw0...)
		gx := gemm{false, false, rows, c, vocab, 1, dy, vocab, w, c, 0, dx, c}
		gw := gemm{true, false, vocab, c, rows, 1, dy, vocab, x, c, 1, dw, c}
		if !pair {
			gx.run()
			gw.run()
			return
		}
		sgemmPair(gx, gw)
		return
	}
	SetThreads(1)
	oneX, oneW := run(false)
	wantX, wantW := make([]float64, rows*c), make([]float64, vocab*c)
	for i := range rows {
		for p := range vocab {
			d := float64(dy[i*vocab+p])
			for j := range c {
				wantX[i*c+j] += d * float64(w[p*c+j])
				wantW[p*c+j] += d * float64(x[i*c+j])
			}
		}
	}
	for i := range wantW {
		wantW[i] += float64(dw0[i])
	}
	if err := near.Check(wantX, widen(oneX), 1e-5); err != nil {
		t.Errorf("dx at one thread against float64 sums: %v", err)
	}
	if err := near.Check(wantW, widen(oneW), 1e-5); err != nil {
		t.Errorf("dW at one thread against float64 sums: %v", err)
	}
	same := func(a, b []float32) int {
		n := 0
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				n++
			}
		}
		return n
	}
	for _, r := range []struct {
		threads int
		speeds  []float64
	}{{1, nil}, {2, nil}, {3, nil}, {4, nil}, {2, []float64{1, 3}}, {2, []float64{5, 1}}, {3, []float64{0.3, 1, 2}}} {
		SetThreads(r.threads)
		ProfilePasses(true)
		var dx, dw []float32
		if r.speeds != nil {
			withGemmSpeeds(r.speeds, func() { dx, dw = run(true) })
		} else {
			dx, dw = run(true)
		}
		passes := Passes()
		ProfilePasses(false)
		if d := same(dx, oneX); d > 0 {
			t.Errorf("%d threads (speeds %v): %d of %d elements of dx differ from two calls at one thread", r.threads, r.speeds, d, len(dx))
		}
		if d := same(dw, oneW); d > 0 {
			t.Errorf("%d threads (speeds %v): %d of %d elements of dW differ from two calls at one thread", r.threads, r.speeds, d, len(dw))
		}
		// Run one after the other, the products would be two passes, of
		// T units (dx) and of 4 (dW); a symbol table is not needed to tell.
		if r.threads > 1 && (len(passes) != 1 || passes[0].Units != r.threads+4 || passes[0].Count != 1) {
			t.Errorf("%d threads: passes %+v, want one pass of both products in %d units", r.threads, passes, r.threads+4)
		}
	}
}

// TestPairUnits: in a pass of two products, every part of the first and
// every unit of the second runs exactly once, and each thread's share of
// the pass (run_chunks: the w-th of T equal shares of the units) starts
// with its own part of the first product.
func TestPairUnits(t *testing.T) {
	for T := 1; T <= 7; T++ {
		for yunits := 0; yunits <= 40; yunits++ {
			n := T + yunits
			seenX, seenY := make([]int, T), make([]int, yunits)
			for u := range n {
				which, i := pairUnit(T, yunits, u)
				switch {
				case which == 0 && i >= 0 && i < T:
					seenX[i]++
				case which == 1 && i >= 0 && i < yunits:
					seenY[i]++
				default:
					t.Fatalf("T=%d, %d units of the second: unit %d maps to product %d index %d", T, yunits, u, which, i)
				}
			}
			for s := range T {
				if which, i := pairUnit(T, yunits, s*n/T); which != 0 || i != s {
					t.Errorf("T=%d, %d units: share %d starts with product %d index %d, not the first's part %d", T, yunits, s, which, i, s)
				}
				if seenX[s] != 1 {
					t.Errorf("T=%d, %d units: the first's part %d runs %d times", T, yunits, s, seenX[s])
				}
			}
			for i, k := range seenY {
				if k != 1 {
					t.Errorf("T=%d, %d units: the second's unit %d runs %d times", T, yunits, i, k)
				}
			}
		}
	}
}

func widen(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// TestPlainGemm holds the C code's own product (gemm_ref, what a process
// without OpenBLAS trains on) to its definition summed in float64, in the
// four transpositions, with alpha 1 and -0.5 and beta 0, 1 and 0.5, on
// shapes with strides wider than the matrices.
func TestPlainGemm(t *testing.T) {
	defer SetThreads(1)
	SetThreads(1)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, sh := range [][3]int{{1, 1, 1}, {5, 7, 3}, {33, 17, 65}, {64, 48, 40}} {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			ta, tb := tr[0], tr[1]
			lda, ldb, ldc := k+3, n+2, n+1
			if ta {
				lda = m + 3
			}
			if tb {
				ldb = k + 2
			}
			rows := func(tr bool, r, c int) int { // rows of the stored matrix
				if tr {
					return c
				}
				return r
			}
			a, b := make([]float32, rows(ta, m, k)*lda), make([]float32, rows(tb, k, n)*ldb)
			for i := range a {
				a[i] = rng.Float32() - 0.5
			}
			for i := range b {
				b[i] = rng.Float32() - 0.5
			}
			at, bt := opAt(a, ta, lda), opAt(b, tb, ldb)
			for _, ab := range [][2]float32{{1, 0}, {1, 1}, {-0.5, 0.5}} {
				alpha, beta := ab[0], ab[1]
				c := make([]float32, m*ldc)
				for i := range c {
					c[i] = float32(i%5) - 2
				}
				want, got := []float64{}, []float64{}
				for i := range m {
					for j := range n {
						var s float64
						for p := range k {
							s += at(i, p) * bt(p, j)
						}
						want = append(want, float64(alpha)*s+float64(beta)*float64(c[i*ldc+j]))
					}
				}
				before := append([]float32(nil), c...)
				withPlainGemm(func() { sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) })
				for i := range m {
					for j := range n {
						got = append(got, float64(c[i*ldc+j]))
					}
					for j := n; j < ldc; j++ {
						if c[i*ldc+j] != before[i*ldc+j] {
							t.Fatalf("%dx%dx%d ta=%v tb=%v: c[%d][%d] past the row written", m, n, k, ta, tb, i, j)
						}
					}
				}
				if err := near.Check(want, got, 1e-5); err != nil {
					t.Errorf("%dx%dx%d ta=%v tb=%v alpha=%v beta=%v: %v", m, n, k, ta, tb, alpha, beta, err)
				}
			}
		}
	}
}

// TestCutRows holds par.c's cut of a product's row blocks by the threads'
// speeds to the rule, worked out by hand: blocks in proportion to the
// speeds, rounded, but no part under half its even share (nor under
// fewest) or over twice it; unknown speeds cut evenly.
func TestCutRows(t *testing.T) {
	for _, c := range []struct {
		speeds               []float64
		units, parts, fewest int
		want                 []int // nil: cut evenly
	}{
		{[]float64{1, 3}, 100, 2, 1, []int{0, 25, 100}},
		{[]float64{2, 2}, 101, 2, 1, []int{0, 51, 101}},               // 50.5 rounds up
		{[]float64{1, 9}, 100, 2, 1, []int{0, 25, 100}},               // 10: half the even 50
		{[]float64{9, 1}, 100, 2, 1, []int{0, 75, 100}},               // the slow part keeps 25
		{[]float64{1, 1, 1, 9}, 120, 4, 1, []int{0, 15, 30, 60, 120}}, // 90 capped at twice 30
		{[]float64{1, 3}, 100, 2, 40, []int{0, 40, 100}},              // fewest above half
		{[]float64{3, 1, 2}, 61, 3, 2, []int{0, 31, 41, 61}},          // 30.5 -> 31, 40.67 -> 41
		{nil, 100, 2, 1, nil},
		{[]float64{1, 1}, 100, 3, 1, nil}, // speeds of another thread count
	} {
		at, ok := cutRows(c.speeds, c.units, c.parts, c.fewest)
		if c.want == nil {
			if ok {
				t.Errorf("speeds %v, %d parts: cut %v, want an even cut", c.speeds, c.parts, at)
			}
			continue
		}
		if !ok || !slices.Equal(at, c.want) {
			t.Errorf("speeds %v, %d blocks in %d (fewest %d): cut %v (ok %v), want %v", c.speeds, c.units, c.parts, c.fewest, at, ok, c.want)
		}
	}
	// Any speeds: the parts tile the blocks, each in its bounds.
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		parts := 2 + rng.IntN(15)
		units := parts * (1 + rng.IntN(40))
		units += rng.IntN(parts)
		even := units / parts
		fewest := 1 + rng.IntN(even)
		sp := make([]float64, parts)
		for i := range sp {
			sp[i] = 0.05 + 5*rng.Float64()
		}
		at, ok := cutRows(sp, units, parts, fewest)
		if !ok {
			t.Fatalf("speeds %v: no cut", sp)
		}
		lo, hi := max((even+1)/2, fewest), 2*even
		for i := range parts {
			if n := at[i+1] - at[i]; n < lo || n > hi {
				t.Fatalf("speeds %v, %d blocks in %d (fewest %d): part %d has %d blocks, not in [%d, %d] (cut %v)", sp, units, parts, fewest, i, n, lo, hi, at)
			}
		}
		if at[0] != 0 || at[parts] != units {
			t.Fatalf("cut %v does not tile %d blocks", at, units)
		}
	}
}

// TestTileParts holds the head's column blocks' row parts to the rule,
// worked by hand: from at least 2T units in all, the fewest parts a block
// that fill the last round of T to 90%, else the fullest of 4 tried.
func TestTileParts(t *testing.T) {
	for _, c := range []struct{ blocks, T, most, want int }{
		{25, 1, 85, 1},  // 25 units, one thread: full
		{25, 2, 85, 1},  // 25 units in 13 rounds of 2: 25/26
		{25, 4, 85, 2},  // 25 in 7 rounds of 4 fill 25/28 = 0.89; 50 in 13: 50/52
		{25, 8, 85, 3},  // 50 in 7 rounds of 8: 50/56 = 0.89; 75 in 10: 0.94
		{25, 16, 85, 3}, // 50 in 4 rounds of 16: 0.78; 75 in 5: 0.94
		{25, 16, 2, 2},  // at most 2
		{3, 4, 3, 3},    // 9 units in 3 rounds of 4: 0.75, and no more than 3
		{3, 5, 8, 5},    // 12 in 3 rounds of 5: 0.8; 15 in 3: full
		{7, 16, 40, 6},  // 35: 0.73, 42: 0.875, 49: 0.77, 56: 0.875: the first of the fullest
		{4, 3, 0, 1},    // a block too small to cut: 1
	} {
		if got := tileParts(c.blocks, c.T, c.most); got != c.want {
			t.Errorf("%d blocks at %d threads (at most %d): %d parts, want %d", c.blocks, c.T, c.most, got, c.want)
		}
	}
}

// TestLearnSpeeds holds the speeds learned from a pass to the rule: each
// part's rows over its time from the pass's start, relative to the
// parts' mean, weighed 1/4 against the estimate before (1 for each
// thread when none is known); nothing learned from a part that another
// thread ran.
func TestLearnSpeeds(t *testing.T) {
	// 240 rows in two parts of 120: rates 120/1 and 120/2, mean 90.
	got := learnCheck(240, [2]float64{1, 2}, [2]int{0, 1})
	want := []float64{0.75 + 0.25*120.0/90, 0.75 + 0.25*60.0/90}
	if got == nil || near.Check(want, got, 1e-12) != nil {
		t.Errorf("parts of 1 s and 2 s: speeds %v, want %v", got, want)
	}
	if got := learnCheck(240, [2]float64{1, 2}, [2]int{0, 0}); got != nil {
		t.Errorf("both parts on thread 0: speeds %v learned, want none", got)
	}
}

// opAt is element (r, c) of op(x), x row-major with leading dimension
// ld (transposed: x[c ld + r]), as a float64.
func opAt(x []float32, trans bool, ld int) func(r, c int) float64 {
	return func(r, c int) float64 {
		if trans {
			return float64(x[c*ld+r])
		}
		return float64(x[r*ld+c])
	}
}
