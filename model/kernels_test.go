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
			bnStats(x, rows, c, got)
			if err := near.Check(want, got, 1e-13); err != nil {
				t.Errorf("%d channels, %d rows: %v", c, rows, err)
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
		{"stats", 4, func() { bnStats(x, rows, c, s) }},
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
