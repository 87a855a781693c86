package mpi_test

import (
	"fmt"
	"testing"

	"gonum.org/v1/gonum/blas/blas32"

	"train/mpi"
)

// BenchmarkAdd checks that the ring's reduction kernel (C, -O3, vectorised
// by GCC) runs at memory speed: against a plain Go loop (which the Go
// compiler does not vectorise), gonum's Saxpy (its SSE assembly), and
// Go's copy as the memory-speed yardstick. 256 KiB is one ring segment
// (in L2); 64 MiB is DRAM. b.SetBytes counts the bytes of dst+src read.
func BenchmarkAdd(b *testing.B) {
	for _, n := range []int{64 << 10, 16 << 20} { // floats: 256 KiB, 64 MiB
		dst := make([]float32, n)
		src := make([]float32, n)
		for i := range src {
			src[i] = 1e-9
		}
		size := fmt.Sprintf("%dKiB", 4*n>>10)
		b.Run("c-kernel/"+size, func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for range b.N {
				mpi.AddFloat32(dst, src)
			}
		})
		b.Run("go-loop/"+size, func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for range b.N {
				for i, v := range src {
					dst[i] += v
				}
			}
		})
		b.Run("gonum-saxpy/"+size, func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			x := blas32.Vector{N: n, Inc: 1, Data: src}
			y := blas32.Vector{N: n, Inc: 1, Data: dst}
			for range b.N {
				blas32.Axpy(1, x, y)
			}
		})
		b.Run("copy/"+size, func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for range b.N {
				copy(dst, src)
			}
		})
	}
}
