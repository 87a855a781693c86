package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"train/internal/near"
)

// TestBNStats checks bnStats' per-channel sums of x and x*x against the
// definition, summed in Go in float64, on channel counts that take the
// 16-channel register path (16, 48) and the general one (5), an odd
// number of rows, and channels whose mean is far from 0 (where float
// sums would lose the variance). s starts non-zero: the sums are added.
func TestBNStats(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []int{16, 48, 5} {
		for _, rows := range []int{1, 7, 2049} {
			x := make([]float32, rows*c)
			for i := range x {
				x[i] = float32(100*float64(i%c) + rng.NormFloat64())
			}
			want, got := make([]float64, 2*c), make([]float64, 2*c)
			for i := range want {
				want[i], got[i] = float64(i), float64(i)
			}
			for r := range rows {
				for ch := range c {
					v := float64(x[r*c+ch])
					want[ch] += v
					want[c+ch] += v * v
				}
			}
			bnStats(x, rows, c, got, 0)
			if err := near.Check(want, got, 1e-13); err != nil {
				t.Errorf("%d channels, %d rows: %v", c, rows, err)
			}
		}
	}
}

// TestBNKernelsWideSameBits: BatchNorm's sums give the same bits through
// their AVX-512 versions (kernels.c's bn_stats_v4, grad_sums_v4) as
// through the AVX2 and baseline code, on channel counts that take the
// 16-channel paths (16, 32, 48, 64) and the general one (5), rows that
// end inside a 32-row block, and under both masks: equal values
// (near.Check with tolerance 0, which NaN fails). TestBNStats and the
// PyTorch references check the values themselves.
func TestBNKernelsWideSameBits(t *testing.T) {
	if !bnWide(-1) {
		t.Skip("this CPU has no AVX-512 (or the sums' wide versions are off): one path only, nothing to compare")
	}
	defer bnWide(1)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []int{16, 32, 48, 64, 5} {
		for _, rows := range []int{1, 45, 3137} {
			x, dy := normals(rng, rows*c), normals(rng, rows*c)
			for i := range x {
				x[i] += float32(i % c) // means away from 0
			}
			mhi, mlo, invstd := normals(rng, c), normals(rng, c), normals(rng, c)
			scale, beta := normals(rng, c), normals(rng, c)
			for ch := range c {
				mhi[ch] += float32(ch)
				mlo[ch] *= 1e-7
			}
			sums := func(wide int) (st, gs, gsRelu []float64) {
				bnWide(wide)
				st, gs, gsRelu = make([]float64, 2*c), make([]float64, 2*c), make([]float64, 2*c)
				bnStats(x, rows, c, st, 0)
				bnGradSums(x, dy, rows, c, mhi, mlo, invstd, scale, beta, false, gs)
				bnGradSums(x, dy, rows, c, mhi, mlo, invstd, scale, beta, true, gsRelu)
				return st, gs, gsRelu
			}
			s1, g1, r1 := sums(1)
			s0, g0, r0 := sums(0)
			for _, p := range []struct {
				name         string
				wide, narrow []float64
			}{{"bnStats", s1, s0}, {"bnGradSums", g1, g0}, {"bnGradSums with the ReLU", r1, r0}} {
				if err := near.Check(p.narrow, p.wide, 0); err != nil {
					t.Errorf("%s, %d channels, %d rows, AVX-512 against AVX2: %v", p.name, c, rows, err)
				}
			}
		}
	}
}

// TestBNReLUMaskFromInput checks that BatchNorm's backward kernels under
// a fused ReLU, which find the ReLU's mask by recomputing the forward's
// output from x, mask exactly where the forward's output (affine) was 0:
// their sums and dx must equal, bit for bit, those of the unfused path,
// dy masked by that output (reluMask) and then the kernels without the
// ReLU. x sits on the edge in many places: exactly at the mean with beta
// 0 (output exactly 0), and a few floats either side of -beta/scale,
// where rounding decides the sign; a channel has scale 0. Channel counts
// 16 (vector path) and 5.
func TestBNReLUMaskFromInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []int{16, 5} {
		rows := 301
		mean, scale, beta := make([]float32, c), make([]float32, c), make([]float32, c)
		mlo, invstd, a, b, k := make([]float32, c), make([]float32, c), make([]float32, c), make([]float32, c), make([]float32, c)
		for ch := range c {
			mean[ch] = float32(rng.NormFloat64())
			scale[ch] = float32(rng.NormFloat64())
			beta[ch] = float32(rng.NormFloat64())
			if ch%4 == 0 {
				beta[ch] = 0
			}
			mlo[ch] = float32(1e-9 * rng.NormFloat64())
			invstd[ch], a[ch], b[ch], k[ch] = float32(rng.Float64()+0.5), float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		scale[c-1] = 0
		x, dy := make([]float32, rows*c), make([]float32, rows*c)
		for r := range rows {
			for ch := range c {
				i := r*c + ch
				dy[i] = float32(rng.NormFloat64())
				switch r % 3 {
				case 0:
					x[i] = float32(rng.NormFloat64())
				case 1:
					x[i] = mean[ch]
				default: // near the edge, where the output's sign is a rounding
					e := mean[ch]
					if scale[ch] != 0 {
						e = mean[ch] - beta[ch]/scale[ch]
					}
					for range r % 7 {
						e = math.Nextafter32(e, float32(math.Inf(1-2*(r/3%2))))
					}
					x[i] = e
				}
			}
		}
		y, g := make([]float32, rows*c), make([]float32, rows*c)
		affine(y, x, mean, scale, beta, rows, c, true)
		reluMask(g, dy, y, rows*c)
		zeros, edge := 0, 0
		for i, v := range y {
			if v == 0 {
				zeros++
			}
			if v != 0 && v < 1e-6 || v == 0 && math.Abs(float64(x[i]-mean[i%c])*float64(scale[i%c])+float64(beta[i%c])) < 1e-6 {
				edge++
			}
		}
		if zeros < rows*c/4 || zeros > 3*rows*c/4 || edge < rows*c/8 {
			t.Fatalf("%d channels: the data do not test the edge (%d of %d outputs 0, %d within 1e-6 of it)", c, zeros, rows*c, edge)
		}
		want, got := make([]float64, 2*c), make([]float64, 2*c)
		bnGradSums(x, g, rows, c, mean, mlo, invstd, nil, nil, false, want)
		bnGradSums(x, dy, rows, c, mean, mlo, invstd, scale, beta, true, got)
		for i := range want {
			if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
				t.Errorf("%d channels: sum %d: %v with the mask recomputed, %v masked by the output", c, i, got[i], want[i])
			}
		}
		dxWant, dxGot := make([]float32, rows*c), make([]float32, rows*c)
		bnDx(dxWant, g, x, rows, c, mean, a, b, k, nil, nil, false)
		bnDx(dxGot, dy, x, rows, c, mean, a, b, k, scale, beta, true)
		bad := 0
		for i := range dxWant {
			if math.Float32bits(dxWant[i]) != math.Float32bits(dxGot[i]) {
				if bad++; bad <= 3 {
					t.Errorf("%d channels: dx[%d] = %v with the mask recomputed, %v masked by the output (x %v, output %v)", c, i, dxGot[i], dxWant[i], x[i], y[i])
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d channels: %d of %d dx differ", c, bad, len(dxWant))
		}
	}
}

// BenchmarkBNKernels measures the BatchNorm passes of a ResNet-20 stage-1
// layer (batch 64, 28x28x16) in GB/s moved, against a plain copy.
func BenchmarkBNKernels(b *testing.B) {
	rows, c := 64*784, 16
	x, dy, y, dx := make([]float32, rows*c), make([]float32, rows*c), make([]float32, rows*c), make([]float32, rows*c)
	for i := range x {
		x[i], dy[i], y[i] = float32(i%7), float32(i%5)-2, float32(i%3)-1
	}
	m, v, a := make([]float32, c), make([]float32, c), make([]float32, c)
	s := make([]float64, 2*c)
	// bytes is what a pass reads and writes per value (4 per array).
	for _, k := range []struct {
		name  string
		bytes int
		pass  func()
	}{
		{"sums", 8, func() { bnGradSums(x, dy, rows, c, m, m, v, v, a, true, s) }},
		{"dx", 12, func() { bnDx(dx, dy, x, rows, c, m, a, v, m, v, a, true) }},
		{"stats", 4, func() { bnStats(x, rows, c, s, 0) }},
		{"affine", 8, func() { affine(dx, x, m, v, a, rows, c, true) }},
		{"join", 12, func() { join(dx, x, m, v, a, y, nil, nil, nil, rows, c) }},
		{"mask", 12, func() { reluMask(dx, dy, y, rows*c) }},
		{"copy", 8, func() { copy(dx, x) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			for range b.N {
				k.pass()
			}
			b.ReportMetric(float64(b.N*rows*c*k.bytes)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
