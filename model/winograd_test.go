package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"train/internal/near"
	"train/openblas"
)

// directConv is the convolution's definition in float64 (NHWC input,
// PyTorch's (o, c, k, k) weight), the reference both paths are held to.
func directConv(x []float32, w []float32, n, h, wd, c, o, k, stride, pad int) []float64 {
	oh, ow := (h+2*pad-k)/stride+1, (wd+2*pad-k)/stride+1
	y := make([]float64, n*oh*ow*o)
	for b := range n {
		for yy := range oh {
			for xx := range ow {
				for oc := range o {
					var s float64
					for i := range k {
						for j := range k {
							iy, ix := yy*stride+i-pad, xx*stride+j-pad
							if iy < 0 || iy >= h || ix < 0 || ix >= wd {
								continue
							}
							for ch := range c {
								s += float64(x[((b*h+iy)*wd+ix)*c+ch]) * float64(w[((oc*c+ch)*k+i)*k+j])
							}
						}
					}
					y[((b*oh+yy)*ow+xx)*o+oc] = s
				}
			}
		}
	}
	return y
}

// maxRelErr is the largest |got - want| over the largest |want|; NaN and
// infinities count as an error of +Inf.
func maxRelErr(got []float32, want []float64) float64 {
	var scale, worst float64
	for _, v := range want {
		scale = math.Max(scale, math.Abs(v))
	}
	for i, v := range want {
		d := math.Abs(float64(got[i]) - v)
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return math.Inf(1)
		}
		worst = math.Max(worst, d)
	}
	return worst / scale
}

// convModes are the 3x3 paths the tests hold to the definition: im2col
// (0) and Winograd's F(2x2) and F(4x4).
var convModes = []int{0, 2, 4}

// tolerance is each mode's bound on the error over the largest value.
// F(4x4)'s transforms have coefficients up to 8 (A^T), and its kernel's
// divide by 3 and 15, inexact in binary, so it rounds several times more
// than F(2x2): measured here, 1.6e-6 of the largest output at 16 channels
// and 7.3e-6 at 512, half the bound. Lavin's points (0, +-1, +-2, before
// winograd.c's) reached 1.7e-5 at 512 and fail it.
var tolerance = map[int]float64{0: 1e-5, 2: 1e-5, 4: 1.5e-5}

// useMode makes every 3x3 stride-1 convolution run as mode m of
// convModes; tests restore winograd and winoTile when they end.
func useMode(m int) {
	UseWinograd(m != 0)
	winoTile = m
}

// winoShapes are (n, h, w, c, o): odd and even sizes (tiles cut by the
// border), one image and several, few channels and many. Channel counts
// that are multiples of 16 take winograd.c's row paths, the others its
// pointer tables; the shapes give each transform (input, output, the
// output gradient's) both, in the forward and the two gradients.
var winoShapes = [][5]int{{1, 9, 9, 3, 8}, {2, 9, 8, 16, 21}, {2, 9, 7, 16, 16}, {3, 8, 8, 32, 37}, {2, 13, 10, 32, 48},
	{2, 14, 14, 64, 69}, {1, 14, 14, 256, 261}, {1, 7, 7, 512, 517}, {1, 7, 7, 64, 512}, {2, 14, 14, 32, 32},
	{3, 14, 13, 16, 21}, {1, 13, 18, 5, 16}}

// TestWinogradForward: Winograd's F(2x2) and F(4x4) against the float64
// definition, on odd and even sizes (tiles cut by the border), one image
// and several, few channels and many, with a bias and without; its error
// beside im2col's; at each of winograd.c's code levels this CPU has.
func TestWinogradForward(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	levels := winoLevels(t)
	for i, sh := range winoShapes {
		n, h, w, c, o := sh[0], sh[1], sh[2], sh[3], sh[4]
		// Every other shape has a bias: the output transform then adds to
		// y (the bias copied in first) instead of setting it.
		bias := i%2 == 1
		p := &Params{}
		conv := NewConv2D(p, "c", c, h, w, o, 3, 1, 1, bias)
		p.Alloc()
		rng := rand.New(rand.NewPCG(uint64(h), 3))
		conv.init(rng)
		x := normals(rng, n*h*w*c)
		want := directConv(x, conv.W.Of(p.Data), n, h, w, c, o, 3, 1, 1)
		if bias {
			b := conv.B.Of(p.Data)
			copy(b, normals(rng, o))
			for j := range want {
				want[j] += float64(b[j%o])
			}
		}
		for _, lv := range levels {
			winoLevel(lv)
			errs := map[int]float64{}
			for _, m := range convModes {
				useMode(m)
				if conv.wino() != m {
					t.Fatalf("%v: Winograd tile %d, want %d", sh, conv.wino(), m)
				}
				y := make([]float32, n*h*w*o)
				conv.Forward(y, x, n)
				errs[m] = maxRelErr(y, want)
			}
			t.Logf("%v level %d: max error / max |y|: im2col %.2g, F(2x2) %.2g, F(4x4) %.2g", sh, lv, errs[0], errs[2], errs[4])
			for _, m := range convModes[1:] {
				if !(errs[m] < tolerance[m]) {
					t.Errorf("%v level %d: F(%dx%d)'s error %.3g of the largest output, want below %g", sh, lv, m, m, errs[m], tolerance[m])
				}
			}
		}
	}
}

// winoLevels are winograd.c's code levels (winoLevel) this CPU runs, from
// its own down to the x86-64 baseline; the test puts the CPU's choice
// back when it ends.
func winoLevels(t *testing.T) []int {
	t.Helper()
	cpu := winoLevel(4)
	t.Cleanup(func() { winoLevel(4) })
	var levels []int
	for _, lv := range []int{4, 3, 0} {
		if lv <= cpu {
			levels = append(levels, lv)
		}
	}
	if cpu < 4 {
		t.Logf("this CPU's code level is %d: the levels above it do not run", cpu)
	}
	return levels
}

// directGrads are the 3x3, stride-1, padding-1 convolution's input and
// weight gradients (convGrads).
func directGrads(x, w, dy []float32, n, h, wd, c, o int) (dx, dw []float64) {
	return convGrads(x, w, dy, n, h, wd, c, o, 3, 1, 1)
}

// convGrads are a k x k convolution's input and weight gradients by
// their definitions in float64: with (iy, ix) = (y*stride+i-pad,
// x*stride+j-pad) inside the image, dx[b, iy, ix, c] = sum of dy[b, y,
// x, o] w[o, c, i, j] and dw[o, c, i, j] = sum of dy[b, y, x, o] x[b,
// iy, ix, c].
func convGrads(x, w, dy []float32, n, h, wd, c, o, k, stride, pad int) (dx, dw []float64) {
	oh, ow := (h+2*pad-k)/stride+1, (wd+2*pad-k)/stride+1
	dx, dw = make([]float64, n*h*wd*c), make([]float64, o*c*k*k)
	for b := range n {
		for y := range oh {
			for xx := range ow {
				for oc := range o {
					g := float64(dy[((b*oh+y)*ow+xx)*o+oc])
					for i := range k {
						for j := range k {
							iy, ix := y*stride+i-pad, xx*stride+j-pad
							if iy < 0 || iy >= h || ix < 0 || ix >= wd {
								continue
							}
							for ch := range c {
								dx[((b*h+iy)*wd+ix)*c+ch] += g * float64(w[((oc*c+ch)*k+i)*k+j])
								dw[((oc*c+ch)*k+i)*k+j] += g * float64(x[((b*h+iy)*wd+ix)*c+ch])
							}
						}
					}
				}
			}
		}
	}
	return dx, dw
}

// TestWinogradBackward: the input and weight gradients through Winograd
// against their float64 definitions, beside im2col's errors, at each of
// winograd.c's code levels this CPU has.
func TestWinogradBackward(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	levels := winoLevels(t)
	for _, sh := range winoShapes {
		n, h, w, c, o := sh[0], sh[1], sh[2], sh[3], sh[4]
		p := &Params{}
		conv := NewConv2D(p, "c", c, h, w, o, 3, 1, 1, false)
		p.Alloc()
		rng := rand.New(rand.NewPCG(uint64(h), 5))
		conv.init(rng)
		x := normals(rng, n*h*w*c)
		dy := normals(rng, n*h*w*o)
		wantDx, wantDw := directGrads(x, conv.W.Of(p.Data), dy, n, h, w, c, o)
		for _, lv := range levels {
			winoLevel(lv)
			for _, m := range convModes {
				useMode(m)
				if conv.wino() != m {
					t.Fatalf("%v: Winograd tile %d, want %d", sh, conv.wino(), m)
				}
				y, dx := make([]float32, n*h*w*o), make([]float32, n*h*w*c)
				clear(conv.wt)        // the last mode's copy would hide a forward that left it unset
				conv.Forward(y, x, n) // sets the permuted weight backward reads
				clear(p.Grad)
				conv.Backward(dx, dy, x, y, n)
				ex, ew := maxRelErr(dx, wantDx), maxRelErr(conv.W.Of(p.Grad), wantDw)
				t.Logf("%v level %d tile %d: max error / max |.|: dx %.2g, dw %.2g", sh, lv, m, ex, ew)
				if !(ex < tolerance[m]) || !(ew < tolerance[m]) {
					t.Errorf("%v level %d tile %d: errors dx %.3g, dw %.3g of the largest value, want below %g", sh, lv, m, ex, ew, tolerance[m])
				}
			}
		}
	}
}

// BenchmarkConv3x3 times one forward of ResNet-20's and ResNet-50's
// 3x3 stride-1 layers through im2col and through Winograd.
func BenchmarkConv3x3(b *testing.B) {
	if _, err := openblas.Load("", 1); err != nil {
		b.Fatal(err)
	}
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	for _, sh := range [][3]int{{64, 28, 16}, {64, 14, 32}, {64, 7, 64}, {8, 56, 64}, {8, 28, 128}, {8, 14, 256}, {8, 7, 512}} {
		n, h, c := sh[0], sh[1], sh[2]
		p := &Params{}
		conv := NewConv2D(p, "c", c, h, h, c, 3, 1, 1, false)
		p.Alloc()
		conv.init(rand.New(rand.NewPCG(1, 2)))
		x, y := make([]float32, n*h*h*c), make([]float32, n*h*h*c)
		for _, m := range convModes {
			name := map[int]string{0: "im2col", 2: "F2x2", 4: "F4x4"}[m]
			b.Run(fmt.Sprintf("n%d_%dx%d_c%d/%s", n, h, h, c, name), func(b *testing.B) {
				useMode(m)
				for b.Loop() {
					conv.Forward(y, x, n)
				}
				b.ReportMetric(float64(2*9*n*h*h*c*c)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// normals is n draws of the standard normal, in rng's order.
func normals(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestWinogradPlan: the products per channel pair F(m x m) takes over an
// image, counted by hand: F(4x4)'s tiles of 6 x 6 along sides that 4
// divides (28: 7 tiles, 42 values a side), sides of 3 or more whole tiles
// and a remainder of 1 or 2 ending in an F(2) tile of 4 values (14 and 13:
// 6+6+6+4 = 22), others padded to whole tiles of 4 (7: 12; 10: 18; 18:
// 4 whole tiles and 2, 6*4+4 = 28); F(2x2)'s 4 values per 2 outputs. The
// F(2) tiles only up to 32 channels in and out: 14x14 at 33 or 64 is
// padded (24 a side).
func TestWinogradPlan(t *testing.T) {
	for _, c := range [][6]int{{28, 28, 16, 16, 4, 42 * 42}, {14, 14, 32, 32, 4, 22 * 22}, {13, 13, 3, 8, 4, 22 * 22},
		{7, 7, 16, 16, 4, 12 * 12}, {10, 10, 16, 16, 4, 18 * 18}, {14, 28, 16, 32, 4, 22 * 42},
		{13, 18, 5, 16, 4, 22 * 28}, {56, 56, 16, 16, 4, 84 * 84}, {14, 14, 16, 16, 2, 28 * 28}, {7, 7, 16, 16, 2, 16 * 16},
		{14, 14, 32, 33, 4, 24 * 24}, {14, 14, 64, 64, 4, 24 * 24}, {14, 14, 33, 16, 4, 24 * 24}} {
		h, w, ci, co, m := c[0], c[1], c[2], c[3], c[4]
		if got := winoProducts(h, w, ci, co, m); got != c[5] {
			t.Errorf("%dx%d, %d to %d channels, F(%dx%d): %d products per channel pair, want %d", h, w, ci, co, m, m, got, c[5])
		}
	}
}

// TestWinogradSplit: an image's output and input gradient through
// Winograd are the same bits however the batch around it is cut (the
// whole batch in one call, or two halves), which is what lets ranks with
// different shares of a batch agree (e2e TestResNetEquivalence): only
// the weight gradient, a sum over the batch, depends on the cut, by
// rounding. Shapes of the e2e's small ResNet and of ResNet-20.
func TestWinogradSplit(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	for _, sh := range [][5]int{{2, 24, 16, 3, 16}, {4, 24, 16, 16, 16}, {4, 24, 8, 32, 32}, {4, 24, 4, 64, 64}, {4, 6, 28, 16, 16}, {4, 8, 7, 64, 64}, {4, 8, 14, 32, 32}} {
		m, n, h, c, o := sh[0], sh[1], sh[2], sh[3], sh[4]
		useMode(m)
		p := &Params{}
		conv := NewConv2D(p, "c", c, h, h, o, 3, 1, 1, false)
		p.Alloc()
		rng := rand.New(rand.NewPCG(1, 3))
		conv.init(rng)
		x := normals(rng, n*h*h*c)
		dy := normals(rng, n*h*h*o)
		y, dx := make([]float32, n*h*h*o), make([]float32, n*h*h*c)
		conv.Forward(y, x, n)
		clear(p.Grad)
		conv.Backward(dx, dy, x, y, n)
		dw := slices.Clone(conv.W.Of(p.Grad))
		y2, dx2 := make([]float32, len(y)), make([]float32, len(dx))
		clear(p.Grad)
		in, out := n/2*h*h*c, n/2*h*h*o
		for k := range 2 {
			conv.Forward(y2[k*out:(k+1)*out], x[k*in:(k+1)*in], n/2)
			conv.Backward(dx2[k*in:(k+1)*in], dy[k*out:(k+1)*out], x[k*in:(k+1)*in], nil, n/2)
		}
		if !slices.Equal(y, y2) || !slices.Equal(dx, dx2) {
			t.Errorf("%v: the output or dx of an image changed with the batch's cut", sh)
		}
		if err := near.Check(dw, conv.W.Of(p.Grad), 1e-5); err != nil {
			t.Errorf("%v: dw of the whole batch against the sum of its halves: %v", sh, err)
		}
	}
}

// TestConvFew: 3x3 stride-1 layers of 1 to 3 input channels and a
// multiple of 16 out (a stem) run directly under --conv winograd
// (conv_few.c), and their output and gradients match the float64
// definitions as closely as im2col's; the input gradient, still
// Winograd's F(4x4), within its bound. Several images, so that the
// weight gradient sums several parts; sides that are odd, even and too
// small for an interior.
func TestConvFew(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	UseWinograd(true)
	winoTile = 0
	for _, sh := range [][5]int{{5, 28, 28, 1, 16}, {3, 9, 7, 3, 32}, {2, 5, 6, 2, 16}, {1, 2, 3, 1, 48}} {
		n, h, w, c, o := sh[0], sh[1], sh[2], sh[3], sh[4]
		p := &Params{}
		conv := NewConv2D(p, "c", c, h, w, o, 3, 1, 1, false)
		p.Alloc()
		if !conv.few() {
			t.Fatalf("%v: not run directly", sh)
		}
		rng := rand.New(rand.NewPCG(uint64(h), 7))
		conv.init(rng)
		x, dy := normals(rng, n*h*w*c), normals(rng, n*h*w*o)
		y, dx := make([]float32, n*h*w*o), make([]float32, n*h*w*c)
		conv.Forward(y, x, n)
		clear(p.Grad)
		conv.Backward(dx, dy, x, y, n)
		wantDx, wantDw := directGrads(x, conv.W.Of(p.Data), dy, n, h, w, c, o)
		ey, ew := maxRelErr(y, directConv(x, conv.W.Of(p.Data), n, h, w, c, o, 3, 1, 1)), maxRelErr(conv.W.Of(p.Grad), wantDw)
		ex := maxRelErr(dx, wantDx)
		t.Logf("%v: max error / max |.|: y %.2g, dw %.2g, dx %.2g", sh, ey, ew, ex)
		if !(ey < tolerance[0]) || !(ew < tolerance[0]) || !(ex < tolerance[conv.wino()]) {
			t.Errorf("%v: errors y %.3g, dw %.3g (want below %g), dx %.3g (want below %g)", sh, ey, ew, tolerance[0], ex, tolerance[conv.wino()])
		}
	}
	for _, sh := range [][2]int{{4, 16}, {1, 24}} {
		p := &Params{}
		if NewConv2D(p, "c", sh[0], 8, 8, sh[1], 3, 1, 1, false).few() {
			t.Errorf("%d to %d channels: run directly, want Winograd", sh[0], sh[1])
		}
	}
}

// TestWinogradWide: a Winograd pass with fewer parts than threads runs as
// three finer passes (par.c's wide path), and its output, input gradient
// and weight gradient are the bits of the fused path at one thread. At 8
// images (64 over 8 ranks), ResNet-20's 7x7x64 and 14x14x32 layers (F(4x4)
// and F(2) tiles mixed) are 8 forward parts of an image and one weight
// gradient part, so 16 threads take the wide path for all three; the odd
// shapes have one part of several images, with tiles cut by the border,
// and pointer-table transforms (5 and 21 channels).
func TestWinogradWide(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	defer SetThreads(1)
	for _, sh := range [][6]int{{4, 8, 7, 7, 64, 64}, {4, 8, 14, 14, 32, 32}, {4, 6, 9, 7, 16, 21}, {2, 5, 13, 18, 5, 16}, {4, 3, 28, 28, 16, 16}} {
		run := convAtThreads(t, sh, 9)
		y1, dx1, dw1 := run(1)
		before := wideRuns()
		y16, dx16, dw16 := run(16)
		// The forward, the input gradient and the weight gradient.
		if got := wideRuns() - before; got != 3 {
			t.Errorf("%v: %d passes ran wide at 16 threads, want 3", sh, got)
		}
		sameConvBits(t, fmt.Sprintf("%v: ", sh), "at 16 threads", [3][]float32{y1, dx1, dw1}, [3][]float32{y16, dx16, dw16})
	}
}

// sameConvBits reports each of a convolution's output, input gradient
// and weight gradient (as convAtThreads returns them) whose bits differ
// between one thread and another run (how: "at 16 threads"), at its
// first differing element.
func sameConvBits(t *testing.T, where, how string, one, other [3][]float32) {
	t.Helper()
	for k, name := range []string{"y", "dx", "dw"} {
		if i := firstDiff(one[k], other[k]); i >= 0 {
			t.Errorf("%s%s[%d] is %v %s, %v at one", where, name, i, other[k][i], how, one[k][i])
		}
	}
}

// convAtThreads builds a 3x3 stride-1 convolution of shape sh (m, n, h,
// w, c, o) under F(m x m) with random weights, input and output gradient
// (seeded by n and seed), and returns a function that runs its forward
// and backward at a thread count (0: the pool as it is, a simulation
// left on): the output, the input gradient and the weight gradient.
func convAtThreads(t *testing.T, sh [6]int, seed uint64) func(threads int) (y, dx, dw []float32) {
	m, n, h, w, c, o := sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]
	useMode(m)
	p := &Params{}
	conv := NewConv2D(p, "c", c, h, w, o, 3, 1, 1, false)
	p.Alloc()
	rng := rand.New(rand.NewPCG(uint64(n), seed))
	conv.init(rng)
	x, dy := normals(rng, n*h*w*c), normals(rng, n*h*w*o)
	return func(threads int) (y, dx, dw []float32) {
		if threads > 0 {
			if got := SetThreads(threads); got != threads {
				t.Fatalf("SetThreads(%d) = %d", threads, got)
			}
		}
		y, dx = make([]float32, n*h*w*o), make([]float32, n*h*w*c)
		clear(conv.wt) // each forward must set the copy its input gradient reads
		conv.Forward(y, x, n)
		clear(p.Grad)
		conv.Backward(dx, dy, x, y, n)
		return y, dx, slices.Clone(conv.W.Of(p.Grad))
	}
}

// firstDiff is the first index where a and b differ in bits (NaN included),
// or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestWinogradProducts holds winograd.c's own products (k_wino_mul, the
// forward's V U per point, and k_wino_dw_mul, the weight gradient's M^T V)
// to their definition summed in float64: row counts that leave every
// block size's remainder (1 to 45 tiles), channel counts with and without
// a pair of vectors (48), the shapes past MUL_MOST that go to OpenBLAS,
// all of a tile's points at once (block by block of tiles, where they
// fit MUL_ALL) and one, at each of winograd.c's code levels the CPU has
// (winoLevels). Values outside the points asked for must stay as they were,
// and M^T V over the tiles in two calls, the second adding, must be one
// call's.
func TestWinogradProducts(t *testing.T) {
	if _, err := openblas.Load("", 1); err != nil {
		t.Fatal(err)
	}
	const sentinel = float32(12345)
	rng := rand.New(rand.NewPCG(3, 5))
	for _, lv := range winoLevels(t) {
		winoLevel(lv)
		for _, co := range [][2]int{{16, 16}, {32, 32}, {48, 48}, {64, 64}, {16, 48}, {48, 16}, {128, 32}, {96, 64}} {
			c, o := co[0], co[1]
			ld := winoLd(c, o) // a point's kernels to the next's
			for _, tiles := range []int{1, 7, 13, 45} {
				for _, a2 := range []int{16, 36} {
					for _, p := range []int{a2, 1} {
						name := fmt.Sprintf("level %d c %d o %d tiles %d points %d of %d", lv, c, o, tiles, p, a2)
						v, u := normals(rng, tiles*a2*c), normals(rng, a2*ld)
						m := make([]float32, tiles*a2*o)
						for i := range m {
							m[i] = sentinel
						}
						winoMul(m, a2*o, v, a2*c, u, tiles, c, o, p)
						want, got := []float64{}, []float32{}
						for tt := range tiles {
							for j := range a2 {
								for oo := range o {
									g := m[(tt*a2+j)*o+oo]
									if j >= p {
										if g != sentinel {
											t.Fatalf("%s: m of tile %d point %d written", name, tt, j)
										}
										continue
									}
									var s float64
									for cc := range c {
										s += float64(v[(tt*a2+j)*c+cc]) * float64(u[j*ld+cc*o+oo])
									}
									want, got = append(want, s), append(got, g)
								}
							}
						}
						if err := near.Check(want, widen(got), 1e-5); err != nil {
							t.Errorf("%s: V U: %v", name, err)
						}
						mt := normals(rng, tiles*a2*o)
						sentinels := func(n int) []float32 {
							d := make([]float32, n)
							for i := range d {
								d[i] = sentinel
							}
							return d
						}
						d := sentinels((p + 1) * ld)
						winoDWMul(d, mt, a2*o, v, a2*c, tiles, c, o, p, false)
						want, got = want[:0], got[:0]
						for j := range p {
							for oo := range o {
								for cc := range c {
									var s float64
									for tt := range tiles {
										s += float64(mt[(tt*a2+j)*o+oo]) * float64(v[(tt*a2+j)*c+cc])
									}
									want, got = append(want, s), append(got, d[j*ld+oo*c+cc])
								}
							}
						}
						if err := near.Check(want, widen(got), 1e-5); err != nil {
							t.Errorf("%s: M^T V: %v", name, err)
						}
						for i := range d {
							if (i/ld >= p || i%ld >= c*o) && d[i] != sentinel {
								t.Fatalf("%s: d[%d], outside the points' products, written", name, i)
							}
						}
						// The tiles in two calls, the second adding to the
						// first's sums: winograd.c's own sums must give the
						// one call's bits (k_wino_dw_part's chunks rely on
						// it), OpenBLAS's the same sums within rounding.
						if tiles > 1 {
							h := tiles / 2
							d2 := sentinels(p * ld)
							winoDWMul(d2, mt, a2*o, v, a2*c, h, c, o, p, false)
							winoDWMul(d2, mt[h*a2*o:], a2*o, v[h*a2*c:], a2*c, tiles-h, c, o, p, true)
							if winoOwnDW(c, o) {
								if i := firstDiff(d[:p*ld], d2); i >= 0 {
									t.Errorf("%s: M^T V in two calls: d[%d] %v, one call %v", name, i, d2[i], d[i])
								}
							} else if err := near.Check(want, widen(products(d2, p, ld, c*o)), 1e-5); err != nil {
								t.Errorf("%s: M^T V in two calls: %v", name, err)
							}
						}
					}
				}
			}
		}
	}
}

// products is the first p of d's products of n floats each, ld apart,
// one after another.
func products(d []float32, p, ld, n int) []float32 {
	var out []float32
	for j := range p {
		out = append(out, d[j*ld:j*ld+n]...)
	}
	return out
}

// TestWinogradOwnKernels: where each thread makes its own transformed
// kernels (small layers at any thread count, larger ones where the
// threads' copies together stay small: par.c's own_kernels; passes of at
// least as many parts as threads), the forward, the input gradient (the
// rotated kernels, channels swapped: 16 in and 32 out, and 32 in and 16
// out, under F(2x2)) and the weight gradient are the one-thread path's
// bits at 2 and 3 threads; and where the copies would be too large (the
// 64-channel layer at 3 threads) the shared pass's.
func TestWinogradOwnKernels(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	defer SetThreads(1)
	for _, tc := range []struct {
		sh  [6]int
		own map[int]int // threads: the passes that make their own kernels
	}{
		{[6]int{4, 16, 28, 28, 16, 16}, map[int]int{2: 2, 3: 2}},
		{[6]int{2, 16, 12, 12, 16, 32}, map[int]int{2: 2, 3: 2}},
		{[6]int{2, 16, 9, 9, 32, 16}, map[int]int{2: 2, 3: 2}},
		// ResNet-20's 32- and 64-channel layers: 104,000 and 148,032
		// floats, own at 2 threads; at 3 the 64-channel layer's copies
		// (444,096 floats) are more than OWN_COPIES.
		{[6]int{4, 24, 14, 14, 32, 32}, map[int]int{2: 2, 3: 2}},
		{[6]int{4, 64, 7, 7, 64, 64}, map[int]int{2: 2, 3: 0}},
	} {
		sh := tc.sh
		run := convAtThreads(t, sh, 11)
		y1, dx1, dw1 := run(1)
		for _, threads := range []int{2, 3} {
			before := ownRuns()
			y2, dx2, dw2 := run(threads)
			// The forward and the input gradient.
			if got := ownRuns() - before; got != tc.own[threads] {
				t.Errorf("%v: %d passes made their own kernels at %d threads, want %d", sh, got, threads, tc.own[threads])
			}
			for _, c := range []struct {
				name      string
				one, many []float32
			}{{"y", y1, y2}, {"dx", dx1, dx2}, {"dw", dw1, dw2}} {
				if i := firstDiff(c.one, c.many); i >= 0 {
					t.Errorf("%v: %s[%d] is %v at %d threads, %v at one", sh, c.name, i, c.many[i], threads, c.one[i])
				}
			}
		}
	}
}
