package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"train/internal/near"
)

// TestParts cuts each kind of network into pipeline stages and checks
// that the stages, run one after another (activations forward, input
// gradients back), give the whole network's initial values, outputs and
// gradients bit for bit, and that each stage holds only its own tensors.
func TestParts(t *testing.T) {
	cfgs := map[string]Config{
		"mlp":    {Kind: "mlp", Hidden: []int{16, 8}, Input: [3]int{1, 4, 4}, Classes: 3},
		"cnn":    {Kind: "cnn", Input: [3]int{1, 8, 8}, Classes: 4},
		"resnet": {Kind: "resnet", Depth: 8, Input: [3]int{3, 8, 8}, Classes: 5},
		"gpt":    {Kind: "gpt", Classes: 11, GPT: &GPTConfig{Layers: 3, Heads: 2, Dim: 8, Context: 5, Vocab: 11, VocabPadded: 12}},
	}
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			whole, err := Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			whole.Init(7)
			const n = 4
			rng := rand.New(rand.NewPCG(1, 2))
			x := make([]float32, n*whole.InSize())
			for i := range x {
				if cfg.Kind == "gpt" {
					x[i] = float32(rng.IntN(cfg.Classes))
				} else {
					x[i] = float32(rng.NormFloat64())
				}
			}
			out := append([]float32(nil), whole.Forward(x, n)...) // gpt: LossGrad overwrites the logits
			dy := make([]float32, len(out))
			randn(rng, dy)
			copy(whole.LossGrad(n), dy)
			whole.Backward(n)
			want := map[string][2][]float32{}
			for _, ts := range whole.Params.Tensors {
				want[ts.Name] = [2][]float32{ts.Of(whole.Params.Data), ts.Of(whole.Params.Grad)}
			}
			lay, err := Layout(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []int{2, 3} {
				cuts, err := lay.Balance(p)
				if err != nil {
					t.Fatal(err)
				}
				stages := make([]*Model, p)
				held := 0
				in := x
				for s := range p {
					m, err := BuildPart(cfg, Part{Stage: s, Cuts: cuts})
					if err != nil {
						t.Fatal(err)
					}
					m.Init(7)
					stages[s] = m
					for _, ts := range m.Params.Tensors {
						if !ts.Copy {
							held += ts.Size
						}
					}
					in = append([]float32(nil), m.Forward(in, n)...)
				}
				if held != whole.Params.Len() {
					t.Errorf("P=%d %v: the stages hold %d parameters, the network %d", p, cuts, held, whole.Params.Len())
				}
				same(t, "output", in, out)
				copy(stages[p-1].LossGrad(n), dy)
				for s := p - 1; s >= 0; s-- {
					stages[s].Backward(n)
					if s > 0 {
						copy(stages[s-1].LossGrad(n), stages[s].InputGrad(n))
					}
				}
				got := map[string][]float32{}
				for _, m := range stages {
					for _, ts := range m.Params.Tensors {
						w := want[ts.Name]
						same(t, ts.Name+" value", ts.Of(m.Params.Data), w[0])
						g := ts.Of(m.Params.Grad)
						if prev, ok := got[ts.Name]; ok { // the tied table: the stages' gradients summed
							g = append([]float32(nil), g...)
							for i := range g {
								g[i] += prev[i]
							}
						}
						got[ts.Name] = g
					}
				}
				for name, w := range want {
					if name == "transformer.wte.weight" && p > 1 {
						// Summed in another order than one backward adds
						// (the head's part, then each token's): rounding.
						for i, g := range got[name] {
							if !near.Close(float64(w[1][i]), float64(g), 1e-5, 1e-5) {
								t.Fatalf("tied table gradient[%d] = %g, want %g", i, g, w[1][i])
							}
						}
						continue
					}
					same(t, name+" gradient", got[name], w[1])
				}
			}
		})
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s[%d] = %g, want %g (bit for bit)", what, i, got[i], want[i])
		}
	}
}

// TestTensorShards splits a GPT's blocks across T = 2 and 4 shards (the
// shards in goroutines, their sums in memory in place of MPI) and checks
// that every shard's logits, and the shards' gradients put back together,
// are the whole model's within float32 rounding: the attention's heads
// and the MLP's units split, one sum per attention and per MLP each way.
func TestTensorShards(t *testing.T) {
	cfg := Config{Kind: "gpt", Classes: 11, GPT: &GPTConfig{Layers: 2, Heads: 4, Dim: 16, Context: 5, Vocab: 11, VocabPadded: 12}}
	whole, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	whole.Init(7)
	const n = 3
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, n*whole.InSize())
	for i := range x {
		x[i] = float32(rng.IntN(cfg.Classes))
	}
	out := append([]float32(nil), whole.Forward(x, n)...)
	dy := make([]float32, len(out))
	randn(rng, dy)
	copy(whole.LossGrad(n), dy)
	whole.Backward(n)
	for _, shards := range []int{2, 4} {
		ms := make([]*Model, shards)
		red := newMemReduce(shards)
		for s := range shards {
			m, err := BuildPart(cfg, Part{Shard: s, Shards: shards})
			if err != nil {
				t.Fatal(err)
			}
			m.Init(7)
			m.Mode.TensorReduce = func(b []float32) { red.sum(s, b) }
			ms[s] = m
		}
		outs := make([][]float32, shards)
		var wg sync.WaitGroup
		for s, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[s] = append([]float32(nil), m.Forward(x, n)...)
				copy(m.LossGrad(n), dy)
				m.Backward(n)
			}()
		}
		wg.Wait()
		for s := range shards {
			closeTo(t, fmt.Sprintf("T=%d shard %d logits", shards, s), outs[s], out)
		}
		for _, wt := range whole.Params.Tensors {
			value := make([]float32, wt.Size)
			grad := make([]float32, wt.Size)
			for _, m := range ms {
				st, ok := m.Params.Lookup(wt.Name)
				if !ok {
					t.Fatalf("T=%d: %s missing", shards, wt.Name)
				}
				off, at, size := st.Spans()
				for i := range off {
					copy(value[at[i]:at[i]+size[i]], st.Of(m.Params.Data)[off[i]:off[i]+size[i]])
					copy(grad[at[i]:at[i]+size[i]], st.Of(m.Params.Grad)[off[i]:off[i]+size[i]])
				}
			}
			same(t, fmt.Sprintf("T=%d %s value", shards, wt.Name), value, wt.Of(whole.Params.Data))
			closeTo(t, fmt.Sprintf("T=%d %s gradient", shards, wt.Name), grad, wt.Of(whole.Params.Grad))
		}
	}
}

func closeTo(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range got {
		if !near.Close(float64(want[i]), float64(got[i]), 1e-5, 1e-5*scale) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

// memReduce sums a buffer across n goroutines in place, as an allreduce
// does across ranks: each waits until all n have arrived.
type memReduce struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
	bufs [][]float32
	in   int
	gen  int
}

func newMemReduce(n int) *memReduce {
	r := &memReduce{n: n, bufs: make([][]float32, n)}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *memReduce) sum(i int, b []float32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gen := r.gen
	r.bufs[i] = b
	r.in++
	if r.in == r.n {
		total := make([]float32, len(b))
		for _, o := range r.bufs {
			for j, v := range o {
				total[j] += v
			}
		}
		for _, o := range r.bufs {
			copy(o, total)
		}
		r.in = 0
		r.gen++
		r.cond.Broadcast()
		return
	}
	for gen == r.gen {
		r.cond.Wait()
	}
}
