package optim

import (
	"slices"
	"testing"

	"train/internal/near"
)

// TestNoDecay: with zero gradients, AdamW and SGD only decay, by the
// formula p(1 - lr wd) (Adam's update is 0/(0+eps) = 0); the spans without
// decay must keep their values exactly, and the rest must shrink.
func TestNoDecay(t *testing.T) {
	spans := []Span{{0, 2}, {5, 7}} // of 9: decay 2..4 and 7..8
	for _, name := range []string{"adamw", "adam", "sgd"} {
		c := Config{Name: name, WeightDecay: 0.5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, NoDecay: spans}
		o, err := New(c, 9)
		if err != nil {
			t.Fatal(err)
		}
		p := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
		o.Step(p, make([]float32, 9), 0.1, 1)
		for i, v := range p {
			want := float64(i + 1)
			if (i >= 2 && i < 5) || i >= 7 {
				switch name {
				case "adamw", "sgd":
					want *= 1 - 0.1*0.5
				case "adam": // L2: g = wd p, so the first step moves by lr (m/sqrt(v) = 1)
					want -= 0.1
				}
			}
			if !near.Close(want, float64(v), 0, 1e-6) {
				t.Errorf("%s: parameter %d = %v, want %v", name, i, v, want)
			}
		}
	}
}

func TestSegments(t *testing.T) {
	segs, err := segments([]Span{{0, 2}, {5, 7}}, 9)
	if err != nil {
		t.Fatal(err)
	}
	if want := []segment{{2, false}, {5, true}, {7, false}, {9, true}}; !slices.Equal(segs, want) {
		t.Errorf("segments %v, want %v", segs, want)
	}
	for _, bad := range [][]Span{{{3, 2}}, {{0, 4}, {3, 5}}, {{0, 10}}} {
		if _, err := New(Config{Name: "sgd", NoDecay: bad}, 9); err == nil {
			t.Errorf("spans %v accepted", bad)
		}
	}
	sh := Config{NoDecay: []Span{{0, 2}, {5, 7}, {8, 9}}}.Shard(1, 6)
	if want := []Span{{0, 1}, {4, 5}}; !slices.Equal(sh.NoDecay, want) {
		t.Errorf("shard [1, 6): %v, want %v", sh.NoDecay, want)
	}
}

// TestStepAllocatesNothing: an optimizer step and the gradient clip
// allocate no Go memory, with and without decay spans.
func TestStepAllocatesNothing(t *testing.T) {
	for _, name := range Names {
		for _, spans := range [][]Span{nil, {{0, 2}, {5, 7}}} {
			o, err := New(Config{Name: name, Momentum: 0.9, WeightDecay: 0.1, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, NoDecay: spans}, 9)
			if err != nil {
				t.Fatal(err)
			}
			p, g := make([]float32, 9), make([]float32, 9)
			for i := range g {
				g[i] = float32(i) - 4
			}
			step := 0
			if n := testing.AllocsPerRun(5, func() {
				step++
				ClipGradNorm(g, 1)
				o.Step(p, g, 0.1, step)
			}); n != 0 {
				t.Errorf("%s, no-decay spans %v: a step allocates %v times, want 0", name, spans, n)
			}
		}
	}
}
