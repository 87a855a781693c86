package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestShortcutAddedInto: an identity BasicBlock whose conv1 adds its input
// gradient to the shortcut's, already in dx (inputGradAdder), gives the
// bits of the block that writes conv1's input gradient and then adds the
// shortcut's in a pass of its own (addShortcutInto off): input gradient
// and every parameter's gradient, at 1, 3 and 16 threads (16 takes
// par.c's wide passes), at each of winograd.c's levels this CPU runs (4,
// 3 and 0), on a 16-channel image with F(2) tiles at its edges and a
// 32-channel one. dx starts as garbage, different on each side, as the
// model's turn buffers do: the added path must set it, not add to what
// was there.
func TestShortcutAddedInto(t *testing.T) {
	defer func() { winoTile = 0 }()
	defer UseWinograd(winograd)
	defer SetThreads(1)
	UseWinograd(true)
	winoTile = 0
	shapes := []struct {
		c, h, w, n int
	}{{16, 9, 10, 5}, {32, 8, 8, 3}}
	levels := winoLevels(t)
	type result struct{ dx, grad []float32 }
	run := func(sh int, into bool) result {
		addShortcutInto = into
		defer func() { addShortcutInto = true }()
		s := shapes[sh]
		p := &Params{}
		b := NewBasicBlock(p, &Mode{Training: true}, "b", s.c, s.h, s.w, s.c, 1)
		p.Alloc()
		b.init(rand.New(rand.NewPCG(40, 41)))
		randomAffine(b.parts(), p, 42)
		if !b.conv1.addsInputGrad() {
			t.Fatalf("%d channels: conv1 does not add its input gradient (path %T)", s.c, b.conv1.path())
		}
		rng := rand.New(rand.NewPCG(43, 44))
		x, dy := normals(rng, s.n*b.InSize()), normals(rng, s.n*b.OutSize())
		// Each side's dx starts as different garbage: a backward that
		// left any of it would differ from the other side's.
		garbage := uint64(0)
		if into {
			garbage = 1
		}
		y, dx := make([]float32, s.n*b.OutSize()), normals(rand.New(rand.NewPCG(45, garbage)), s.n*b.InSize())
		b.Forward(y, x, s.n)
		clear(p.Grad)
		b.Backward(dx, dy, x, y, s.n)
		return result{dx, slices.Clone(p.Grad)}
	}
	for _, lv := range levels {
		winoLevel(lv)
		for _, threads := range []int{1, 3, 16} {
			SetThreads(threads)
			for sh, s := range shapes {
				name := fmt.Sprintf("level %d, %d threads, %d channels %dx%d", lv, threads, s.c, s.h, s.w)
				want, got := run(sh, false), run(sh, true)
				// Equal bits alone would pass two NaN results, or two
				// backward passes that wrote nothing.
				if err := finiteNonzero(want.dx); err != nil {
					t.Fatalf("%s: reference dx %v", name, err)
				}
				for _, c := range []struct {
					what      string
					got, want []float32
				}{{"dx", got.dx, want.dx}, {"gradients", got.grad, want.grad}} {
					if i := firstDiff(c.got, c.want); i >= 0 {
						t.Errorf("%s: %s[%d] = %v added into dx, %v apart", name, c.what, i, c.got[i], c.want[i])
					}
				}
			}
		}
	}
}

// finiteNonzero says what is wrong with v if any element is NaN or
// infinite, or every element is 0.
func finiteNonzero(v []float32) error {
	nonzero := false
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("[%d] = %v", i, x)
		}
		nonzero = nonzero || x != 0
	}
	if !nonzero {
		return fmt.Errorf("is all zeros")
	}
	return nil
}
