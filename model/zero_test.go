package model

import (
	"fmt"
	"math"
	"runtime"
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

// TestCopyFillRows: copyPar copies every value (NaN's bits included),
// fillRows writes b into every row and addRows adds it onto every row,
// at 1, 3 and 16 threads, for sizes around a part's and over it, rows
// wider than a part among them, and none touches the values beside its
// slice.
func TestCopyFillRows(t *testing.T) {
	defer SetThreads(1)
	nan := math.Float32frombits(0x7fc00123)
	for _, threads := range []int{1, 3, 16} {
		SetThreads(threads)
		for _, n := range []int{0, 1, 16383, 16384, 16385, 3<<20 + 7} {
			src, dst := make([]float32, n), make([]float32, n+2)
			for i := range src {
				src[i] = float32(i) + 0.5
			}
			if n > 2 {
				src[1], src[n-1] = nan, float32(math.Copysign(0, -1))
			}
			dst[0], dst[n+1] = 7, 9
			copyPar(dst[1:n+1], src)
			if i := firstDiff(dst[1:n+1], src); i >= 0 {
				t.Fatalf("%d threads, copy of %d: [%d] = %v, want %v", threads, n, i, dst[i+1], src[i])
			}
			if dst[0] != 7 || dst[n+1] != 9 {
				t.Fatalf("%d threads, copy of %d: the values beside the slice changed", threads, n)
			}
		}
		for _, sh := range [][2]int{{0, 5}, {1, 384}, {7, 5}, {1024, 1152}, {33, 17}, {3, 20000}, {5, 16384}} {
			rows, c := sh[0], sh[1]
			b := make([]float32, c)
			for i := range b {
				b[i] = float32(i) - 0.25
			}
			if c > 1 {
				b[1] = nan
			}
			y := make([]float32, rows*c+2)
			for i := range y {
				y[i] = 3
			}
			fillRows(y[1:rows*c+1], b, rows, c)
			for r := range rows {
				for j := range c {
					if math.Float32bits(y[1+r*c+j]) != math.Float32bits(b[j]) {
						t.Fatalf("%d threads, %dx%d: [%d][%d] = %v, want %v", threads, rows, c, r, j, y[1+r*c+j], b[j])
					}
				}
			}
			if y[0] != 3 || y[rows*c+1] != 3 {
				t.Fatalf("%d threads, %dx%d: the values beside the rows changed", threads, rows, c)
			}
			// addRows onto distinct values, against Go's float32 sums.
			want := make([]float32, rows*c)
			for i := range want {
				y[1+i] = float32(i%977)*0.37 - 11
				want[i] = y[1+i] + b[i%c]
			}
			addRows(y[1:rows*c+1], b, rows, c)
			if i := firstDiff(y[1:rows*c+1], want); i >= 0 {
				t.Fatalf("%d threads, %dx%d: addRows [%d][%d] = %v, want %v", threads, rows, c, i/c, i%c, y[1+i], want[i])
			}
			if y[0] != 3 || y[rows*c+1] != 3 {
				t.Fatalf("%d threads, %dx%d: addRows changed the values beside the rows", threads, rows, c)
			}
		}
	}
}

// TestScale: Scale multiplies every value by c, each the float32 product
// (NaN stays NaN, -0 times a positive c is -0), at 1, 3 and 16 threads,
// for lengths around its parts' size and well over it, and touches
// nothing beside the slice.
func TestScale(t *testing.T) {
	defer SetThreads(1)
	const c = float32(1) / 3
	for _, threads := range []int{1, 3, 16} {
		SetThreads(threads)
		for _, n := range []int{0, 1, 16383, 16384, 16385, 3<<20 + 7} {
			buf, want := make([]float32, n+2), make([]float32, n+2)
			for i := range buf {
				buf[i] = float32(i%1000)/7 - 50
			}
			if n > 1 {
				buf[1], buf[2] = float32(math.NaN()), float32(math.Copysign(0, -1))
			}
			copy(want, buf)
			for i := 1; i <= n; i++ {
				want[i] *= c
			}
			Scale(buf[1:n+1], c)
			for i := range buf {
				if math.Float32bits(buf[i]) != math.Float32bits(want[i]) && !(math.IsNaN(float64(buf[i])) && math.IsNaN(float64(want[i]))) {
					t.Fatalf("%d threads, %d values: [%d] = %v, want %v", threads, n, i-1, buf[i], want[i])
				}
			}
		}
	}
}

// TestSetCPUs: the pool counts itself oversubscribed exactly when it has
// more threads than the CPUs it was told of (or, told none, than this
// process's affinity allows).
func TestSetCPUs(t *testing.T) {
	defer func() { SetCPUs(0); SetThreads(1) }()
	SetThreads(3)
	if !SetCPUs(2) {
		t.Error("3 threads on 2 CPUs: not oversubscribed")
	}
	if SetCPUs(3) || SetCPUs(8) {
		t.Error("3 threads on 3 or 8 CPUs: oversubscribed")
	}
	SetCPUs(2)
	SetThreads(2)
	if SetCPUs(2) {
		t.Error("2 threads on 2 CPUs: oversubscribed")
	}
	SetThreads(runtime.NumCPU() + 1)
	if !SetCPUs(0) {
		t.Errorf("%d threads on this process's %d CPUs: not oversubscribed", runtime.NumCPU()+1, runtime.NumCPU())
	}
}

// TestPermuteCHW: permuteCHW puts value (b, ch, p) of CHW samples at
// b*c*hw + p*c + ch (NHWC) and back, at 1, 3 and 16 threads, for samples
// smaller and larger than a pass's part, one channel (a copy) among them,
// and touches nothing past the n samples.
func TestPermuteCHW(t *testing.T) {
	defer SetThreads(1)
	for _, threads := range []int{1, 3, 16} {
		SetThreads(threads)
		for _, s := range []struct{ n, c, hw int }{{5, 3, 7}, {64, 3, 1024}, {3, 1, 784}, {2, 64, 300}, {37, 2, 5}} {
			size := s.c * s.hw
			src := make([]float32, (s.n+1)*size)
			for b := range s.n {
				for ch := range s.c {
					for p := range s.hw {
						src[b*size+ch*s.hw+p] = float32(b*1_000_000 + ch*10_000 + p)
					}
				}
			}
			hwc, back := make([]float32, (s.n+1)*size), make([]float32, (s.n+1)*size)
			hwc[s.n*size], back[s.n*size] = -1, -1
			permuteCHW(hwc, src, s.n, s.c, s.hw, true)
			for b := range s.n {
				for ch := range s.c {
					for p := range s.hw {
						if got, want := hwc[b*size+p*s.c+ch], src[b*size+ch*s.hw+p]; got != want {
							t.Fatalf("%d threads, %+v: HWC (%d, %d, %d) = %v, want %v", threads, s, b, p, ch, got, want)
						}
					}
				}
			}
			permuteCHW(back, hwc, s.n, s.c, s.hw, false)
			if i := firstDiff(back[:s.n*size], src[:s.n*size]); i >= 0 {
				t.Fatalf("%d threads, %+v: back to CHW differs at %d", threads, s, i)
			}
			if hwc[s.n*size] != -1 || back[s.n*size] != -1 {
				t.Fatalf("%d threads, %+v: a value past the samples changed", threads, s)
			}
		}
	}
}
