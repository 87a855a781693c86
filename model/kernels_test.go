package model

import "testing"

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
	b.Run("sums", func(b *testing.B) {
		for range b.N {
			bnGradSums(x, dy, y, rows, c, m, m, v, true, s)
		}
		b.ReportMetric(float64(b.N*rows*c*12)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
	b.Run("dx", func(b *testing.B) {
		for range b.N {
			bnDx(dx, dy, x, y, rows, c, m, a, v, m, true)
		}
		b.ReportMetric(float64(b.N*rows*c*16)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
	b.Run("stats", func(b *testing.B) {
		for range b.N {
			bnStats(x, rows, c, s)
		}
		b.ReportMetric(float64(b.N*rows*c*4)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
	b.Run("copy", func(b *testing.B) {
		for range b.N {
			copy(dx, x)
		}
		b.ReportMetric(float64(b.N*rows*c*8)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
}
