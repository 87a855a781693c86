package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBNStatsInConv: a residual block whose Winograd forwards make their
// BatchNorms' statistics (Conv2D.statsTo, par.c's k_wino_forward stats)
// gives the bits of the block whose BatchNorms make their own
// (statsInConv off, the reference: bnStats' own pass, cut as the
// convolution's parts): its output, input gradient, every gradient and
// the running statistics, at 1, 2 and 16 threads. At 16 threads the
// 14x14x32 block's 8 images are fewer parts than threads: its passes run
// wide and leave the statistics to the BatchNorm, which must still give
// the same bits.
func TestBNStatsInConv(t *testing.T) {
	defer func() { winoTile = 0; statsInConv = true }()
	defer UseWinograd(winograd)
	defer SetThreads(1)
	UseWinograd(true)
	winoTile = 0
	shapes := []struct {
		n, c, h int
		wide    int // the threads from which the forwards run wide
	}{{64, 16, 28, 33}, {8, 32, 14, 9}}
	run := func(sh int, inConv bool) (blockRun, int) {
		statsInConv = inConv
		c, h, n := shapes[sh].c, shapes[sh].h, shapes[sh].n
		p := &Params{}
		mode := &Mode{Training: true}
		b := NewBasicBlock(p, mode, "b", c, h, h, c, 1)
		p.Alloc()
		b.init(rand.New(rand.NewPCG(40, 41)))
		randomAffine(b.parts(), p, 42)
		rng := rand.New(rand.NewPCG(43, 44))
		x, dy := normals(rng, n*b.InSize()), normals(rng, n*b.OutSize())
		y, dx := make([]float32, n*b.OutSize()), make([]float32, n*b.InSize())
		before := statsMade
		for range 2 { // the second step's statistics follow the first's update of nothing: the same inputs
			b.Forward(y, x, n)
		}
		clear(p.Grad)
		b.Backward(dx, dy, x, y, n)
		return blockRun{y, dx, slices.Clone(p.Grad), slices.Clone(p.Buffers)}, statsMade - before
	}
	for _, threads := range []int{1, 2, 16} {
		SetThreads(threads)
		for sh := range shapes {
			name := fmt.Sprintf("%d threads, %dx%dx%d, %d images", threads, shapes[sh].h, shapes[sh].h, shapes[sh].c, shapes[sh].n)
			want, off := run(sh, false)
			got, on := run(sh, true)
			want4 := 4 // both convolutions, twice
			if threads >= shapes[sh].wide {
				want4 = 0
			}
			if off != 0 || on != want4 {
				t.Fatalf("%s: %d forwards made their statistics with statsInConv off, %d with it on, want %d", name, off, on, want4)
			}
			sameBlockBits(t, name, "with the statistics made in the convolution", "without", got, want)
		}
	}
}
