package model

import (
	"fmt"
	"math"
	"testing"
)

// TestZero: Zero sets every value of a slice to +0 (NaN, -0 and the rest
// before) at 1, 3 and 16 threads, for lengths around its parts' size and
// well over it, and touches nothing on either side of the slice.
func TestZero(t *testing.T) {
	defer SetThreads(1)
	for _, threads := range []int{1, 3, 16} {
		SetThreads(threads)
		for _, n := range []int{0, 1, 16383, 16384, 16385, 3<<20 + 7} {
			buf := make([]float32, n+2)
			for i := range buf {
				buf[i] = float32(i%7) + 1 // never 0
			}
			if n > 1 {
				buf[1], buf[2] = float32(math.NaN()), float32(math.Copysign(0, -1))
			}
			Zero(buf[1 : n+1])
			name := fmt.Sprintf("%d threads, %d values", threads, n)
			for i := 1; i <= n; i++ {
				if math.Float32bits(buf[i]) != 0 {
					t.Fatalf("%s: [%d] = %v after Zero, want +0", name, i-1, buf[i])
				}
			}
			if buf[0] != 1 || buf[n+1] != float32((n+1)%7)+1 {
				t.Fatalf("%s: the values beside the slice changed: %v, %v", name, buf[0], buf[n+1])
			}
		}
	}
}
