package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"train/internal/near"
)

// TestGeneratorMatchesForward: the KV-cache path, one token at a time,
// gives at every position the logits of the full forward pass over the
// window (the training code, causal masking and all), within 1e-5 of the
// largest logit; and after Reset it starts again from position 0.
func TestGeneratorMatchesForward(t *testing.T) {
	g := &GPTConfig{Layers: 2, Heads: 2, Dim: 16, Context: 12, Vocab: 37, VocabPadded: 40}
	m, err := Build(Config{Kind: "gpt", Classes: g.Vocab, GPT: g})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range m.Params.Data { // wider than 0.02 so every path carries signal
		m.Params.Data[i] = float32(rng.NormFloat64() * 0.3)
	}
	ids := make([]float32, g.Context)
	for i := range ids {
		ids[i] = float32(rng.IntN(g.Vocab))
	}
	full := slices.Clone(m.Forward(ids, 1)) // (Context, Vocab)
	gen, err := m.NewGenerator()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		gen.Reset()
		for pos, id := range ids {
			got := gen.Next(int(id))
			if err := near.Check(full[pos*g.Vocab:(pos+1)*g.Vocab], got, 1e-5); err != nil {
				t.Fatalf("round %d position %d: KV cache against the full forward: %v", round, pos, err)
			}
		}
		if gen.Len() != g.Context {
			t.Errorf("Len %d after %d tokens", gen.Len(), g.Context)
		}
	}
}

// TestSample: temperature 0 and top-k 1 are the argmax; top-k draws only
// among the k largest; and 200k draws at temperature 0.5 follow
// softmax(logits / 0.5) within 0.01 for every token (seeded: the same
// draws every run).
func TestSample(t *testing.T) {
	logits := []float32{0.5, 2, -1, 1.9, 0, 2}
	rng := rand.New(rand.NewPCG(1, 2))
	if got := Sample(logits, 0, 0, rng); got != 1 {
		t.Errorf("greedy: %d, want 1 (the first largest)", got)
	}
	if got := Sample(logits, 1, 1, rng); got != 1 {
		t.Errorf("top-k 1: %d, want 1", got)
	}
	if got := topIDs(logits, 3); !slices.Equal(got, []int{1, 3, 5}) {
		t.Errorf("top 3 ids %v, want [1 3 5]", got)
	}
	for range 1000 {
		if id := Sample(logits, 1, 2, rng); id != 1 && id != 5 {
			t.Fatalf("top-k 2 drew %d", id)
		}
	}
	const n, temp = 200000, 0.5
	count := make([]float64, len(logits))
	for range n {
		count[Sample(logits, temp, 0, rng)]++
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l) / temp)
	}
	for j, l := range logits {
		want := math.Exp(float64(l)/temp) / z
		if !near.Close(want, count[j]/n, 0, 0.01) {
			t.Errorf("token %d drawn %.4f of the time, softmax gives %.4f", j, count[j]/n, want)
		}
	}
}
