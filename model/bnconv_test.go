package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBNConvFused: a block whose conv2 applies bn1 and its ReLU in its
// Winograd input transform (bnConv) gives the bits of the unfused block,
// which writes relu(bn1(c1)) and convolves that: its output, input
// gradient, every parameter's gradient and the running statistics in
// training, and its output in evaluation, at 1, 3 and 16 threads (16 takes par.c's wide
// passes for the small batch), with AVX-512's row transforms (AVX2's run
// unfused, k_wino_fuses, and must say so).
// BatchNorm's weights are drawn with both signs, so the ReLU cuts on both
// sides of the mean, and the images' borders are the padding that must
// stay 0 after the normalisation. The reference is the unfused code path
// (BatchNorm2d.Forward then Conv2D.Forward), not a copy of the fused one.
func TestBNConvFused(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	defer SetThreads(1)
	defer winoLevel(4)
	UseWinograd(true)
	winoTile = 0
	type block interface {
		Layer
		parts() []Layer
		init(*rand.Rand)
	}
	shapes := []struct {
		name string
		n    int
		make func(p *Params, mode *Mode) (block, *bnConv)
	}{
		{"basic 16ch 9x10 (F(4x4), F(2) tiles at the edges)", 5, func(p *Params, mode *Mode) (block, *bnConv) {
			b := NewBasicBlock(p, mode, "b", 16, 9, 10, 16, 1)
			return b, &b.bc
		}},
		{"basic 16->32 stride 2, 7x7", 4, func(p *Params, mode *Mode) (block, *bnConv) {
			b := NewBasicBlock(p, mode, "b", 16, 14, 14, 32, 2)
			return b, &b.bc
		}},
		{"bottleneck 64 -> width 16, 6x6", 3, func(p *Params, mode *Mode) (block, *bnConv) {
			b := NewBottleneck(p, mode, "b", 64, 6, 6, 16, 1)
			return b, &b.bc
		}},
	}
	if cpu := winoLevel(4); cpu < 4 {
		t.Skipf("this CPU has winograd.c's level %d: the fused transforms are AVX-512's, so nothing is fused (the unfused path is every other test's)", cpu)
	}
	levels := []int{4, 3} // AVX2's runs unfused
	run := func(sh int, training bool, fused bool) (blockRun, bool) {
		fuseBN = fused
		defer func() { fuseBN = true }()
		p := &Params{}
		mode := &Mode{Training: training}
		b, bc := shapes[sh].make(p, mode)
		p.Alloc()
		b.init(rand.New(rand.NewPCG(30, 31)))
		randomAffine(b.parts(), p, 32)
		rng := rand.New(rand.NewPCG(33, 34))
		for _, l := range b.parts() { // running statistics away from 0 and 1, for evaluation
			if bn, ok := l.(*BatchNorm2d); ok {
				for i := range bn.mean.Of(p.Buffers) {
					bn.mean.Of(p.Buffers)[i] = float32(rng.NormFloat64())
					bn.vari.Of(p.Buffers)[i] = float32(0.5 + rng.Float64())
				}
			}
		}
		n := shapes[sh].n
		x, dy := normals(rng, n*b.InSize()), normals(rng, n*b.OutSize())
		y, dx := make([]float32, n*b.OutSize()), make([]float32, n*b.InSize())
		b.Forward(y, x, n)
		clear(p.Grad)
		if training { // evaluation's backward has no batch statistics to use
			b.Backward(dx, dy, x, y, n)
		}
		return blockRun{y, dx, slices.Clone(p.Grad), slices.Clone(p.Buffers)}, bc.fused
	}
	for _, lv := range levels {
		winoLevel(lv)
		for _, threads := range []int{1, 3, 16} {
			SetThreads(threads)
			for sh := range shapes {
				for _, training := range []bool{true, false} {
					name := fmt.Sprintf("level %d, %d threads, %s, training %v", lv, threads, shapes[sh].name, training)
					want, wasFused := run(sh, training, false)
					got, fused := run(sh, training, true)
					if wasFused || fused != (lv == 4) {
						t.Fatalf("%s: fused %v with fuseBN off, %v with it on", name, wasFused, fused)
					}
					sameBlockBits(t, name, "fused", "unfused", got, want)
				}
			}
		}
	}
}

// blockRun is what a block's forward and backward leave: its output,
// its input gradient, every gradient and every buffer.
type blockRun struct{ y, dx, grad, bufs []float32 }

// sameBlockBits reports each of got's slices whose bits differ from
// want's (how and wantHow name the two runs), at its first difference.
func sameBlockBits(t *testing.T, name, how, wantHow string, got, want blockRun) {
	t.Helper()
	for _, c := range []struct {
		what      string
		got, want []float32
	}{{"y", got.y, want.y}, {"dx", got.dx, want.dx}, {"gradients", got.grad, want.grad}, {"buffers", got.bufs, want.bufs}} {
		if i := firstDiff(c.got, c.want); i >= 0 {
			t.Errorf("%s: %s[%d] = %v %s, %v %s", name, c.what, i, c.got[i], how, c.want[i], wantHow)
		}
	}
}
