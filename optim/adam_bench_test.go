package optim

import (
	"fmt"
	"testing"
)

func BenchmarkAdamW30M(b *testing.B) {
	benchSteps(b, Config{Name: "adamw", Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}, 30_000_000)
}

// benchSteps times c's updates of n parameters.
func benchSteps(b *testing.B, c Config, n int) {
	o, err := New(c, n)
	if err != nil {
		b.Fatal(err)
	}
	p, g := make([]float32, n), make([]float32, n)
	for i := range g {
		g[i] = float32(i%13) * 1e-3
	}
	b.ResetTimer()
	for i := range b.N {
		o.Step(p, g, 1e-3, i+1)
	}
}

// gptSpans is the spans without decay of the GPT of cpu-vs-torch.sh (6
// layers, width 384, context 256, GPT-2's vocabulary), in the model's
// order, and its parameter count: a run per tensor, most of them under
// a million values.
func gptSpans() ([]Span, int) {
	const d, v, ctx, layers = 384, 50257, 256, 6
	var spans []Span
	at := v*d + ctx*d // token and position tables, decayed
	vec := func(n int) {
		if k := len(spans); k > 0 && spans[k-1].Hi == at {
			spans[k-1].Hi += n
		} else {
			spans = append(spans, Span{at, at + n})
		}
		at += n
	}
	mat := func(n int) { at += n }
	for range layers {
		vec(2 * d) // ln1
		mat(d * 3 * d)
		vec(3 * d)
		mat(d * d)
		vec(d)
		vec(2 * d) // ln2
		mat(d * 4 * d)
		vec(4 * d)
		mat(4 * d * d)
		vec(d)
	}
	vec(2 * d) // the last LayerNorm
	return spans, at
}

// BenchmarkAdamWGPT: AdamW's update of the GPT's 30M parameters, in its
// runs with and without decay, at 1 and 2 threads of the model's pool.
func BenchmarkAdamWGPT(b *testing.B) {
	spans, n := gptSpans()
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			withThreads(threads, func() {
				benchSteps(b, Config{Name: "adamw", Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, NoDecay: spans}, n)
			})
		})
	}
}
