package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Generator runs a GPT one position at a time for sampling, keeping every
// layer's keys and values of the positions so far (the KV cache): each
// new token costs one row through the network and an attention over the
// cache, not a forward pass over the whole window. It reads the model's
// parameters in place and allocates only at creation.
type Generator struct {
	m       *Model
	g       GPTConfig
	emb     *Embedding
	blocks  []*GPTBlock
	lnf     *LayerNorm
	k, v    [][]float32 // per layer (Context, C): the cache
	pos     int         // positions in the cache
	x, a, h []float32   // one row: residual (C), scratch (C, 4C)
	qkv     []float32   // 3C
	att     []float32   // Context
	o, t    []float32   // C
	logits  []float32   // Vocab
	stats   [2]float32  // a LayerNorm row's mean and rstd
}

// NewGenerator returns a generator for m, a GPT.
func (m *Model) NewGenerator() (*Generator, error) {
	if m.Config.GPT == nil {
		return nil, fmt.Errorf("generate needs a gpt model, not %s", m.Config.Kind)
	}
	g := &Generator{m: m, g: *m.Config.GPT}
	for _, l := range m.Layers {
		switch l := l.(type) {
		case *Embedding:
			g.emb = l
		case *GPTBlock:
			g.blocks = append(g.blocks, l)
		case *LayerNorm:
			g.lnf = l
		}
	}
	c, t := g.g.Dim, g.g.Context
	for range g.blocks {
		g.k, g.v = append(g.k, make([]float32, t*c)), append(g.v, make([]float32, t*c))
	}
	g.x, g.a, g.h, g.qkv = make([]float32, c), make([]float32, c), make([]float32, 4*c), make([]float32, 3*c)
	g.att, g.o, g.t, g.logits = make([]float32, t), make([]float32, c), make([]float32, c), make([]float32, g.g.Vocab)
	return g, nil
}

// Len is the number of positions in the cache; at Context it is full.
func (g *Generator) Len() int { return g.pos }

// Reset empties the cache.
func (g *Generator) Reset() { g.pos = 0 }

// Next feeds token id at the next position and returns the logits of the
// token after it (Vocab values, valid until the next call). The cache must
// not be full: a caller continuing past Context resets and feeds the last
// tokens again (the positions restart, as the model was trained on
// windows that start anywhere).
func (g *Generator) Next(id int) []float32 {
	if g.pos >= g.g.Context {
		panic("model: generator cache full")
	}
	p, c := g.m.Params, g.g.Dim
	wte, wpe := g.emb.WTE.Of(p.Data), g.emb.WPE.Of(p.Data)
	add(g.x, wte[id*c:][:c], wpe[g.pos*c:][:c], c)
	for i, b := range g.blocks {
		g.norm(g.a, g.x, b.ln1)
		g.attend(i, b.attn)
		add(g.x, g.x, g.t, c)
		g.norm(g.a, g.x, b.ln2)
		g.linear(g.h, g.a, b.fc)
		gelu(g.h, g.h, 4*c)
		g.linear(g.t, g.h, b.proj)
		add(g.x, g.x, g.t, c)
	}
	g.norm(g.a, g.x, g.lnf)
	sgemm(false, true, 1, g.g.Vocab, c, 1, g.a, c, wte, c, 0, g.logits, g.g.Vocab)
	g.pos++
	return g.logits
}

func (g *Generator) norm(y, x []float32, l *LayerNorm) {
	p := g.m.Params
	layerNorm(y, g.stats[:1], g.stats[1:], x, l.W.Of(p.Data), l.B.Of(p.Data), 1, l.c)
}

func (g *Generator) linear(y, x []float32, l *Conv1D) {
	p := g.m.Params
	copy(y[:l.out], l.B.Of(p.Data))
	sgemm(false, false, 1, l.out, l.in, 1, x, l.in, l.W.Of(p.Data), l.out, 1, y, l.out)
}

// attend is layer i's attention for the new position: its key and value
// join the cache, each head's query meets every cached key, and the
// heads' output goes through c_proj into g.t.
func (g *Generator) attend(i int, a *Attention) {
	c, hd, n := g.g.Dim, a.hd, g.pos+1
	g.linear(g.qkv, g.a, a.cAttn)
	copy(g.k[i][g.pos*c:][:c], g.qkv[c:2*c])
	copy(g.v[i][g.pos*c:][:c], g.qkv[2*c:])
	for h := range a.h {
		s := g.att[:n]
		sgemm(false, true, 1, n, hd, a.scale, g.qkv[h*hd:], hd, g.k[i][h*hd:], c, 0, s, n)
		softmax(s)
		sgemm(false, false, 1, hd, n, 1, s, n, g.v[i][h*hd:], c, 0, g.o[h*hd:], hd)
	}
	g.linear(g.t, g.o, a.cProj)
}

// softmax of a few values in place (sums in float64).
func softmax(s []float32) {
	m := s[0]
	for _, v := range s[1:] {
		m = max(m, v)
	}
	var sum float64
	for j, v := range s {
		e := math.Exp(float64(v - m))
		s[j] = float32(e)
		sum += e
	}
	for j := range s {
		s[j] = float32(float64(s[j]) / sum)
	}
}

// Sample draws a token from logits as GPT-2's and nanoGPT's samplers do:
// divided by temperature, cut to the topK largest (0: all), softmax, one
// draw from rng. Temperature 0 takes the largest (greedy; ties to the
// lowest id).
func Sample(logits []float32, temperature float64, topK int, rng *rand.Rand) int {
	if temperature <= 0 || topK == 1 {
		best := 0
		for j, v := range logits {
			if v > logits[best] {
				best = j
			}
		}
		return best
	}
	ids := topIDs(logits, topK)
	m := math.Inf(-1)
	for _, j := range ids {
		m = math.Max(m, float64(logits[j]))
	}
	w := make([]float64, len(ids))
	var sum float64
	for i, j := range ids {
		w[i] = math.Exp((float64(logits[j]) - m) / temperature)
		sum += w[i]
	}
	u := rng.Float64() * sum
	for i, wi := range w {
		if u < wi {
			return ids[i]
		}
		u -= wi
	}
	return ids[len(ids)-1]
}

// topIDs are the ids of the k largest logits (all for k <= 0), in id
// order; ties at the cut go to the lower ids. One pass with a min-heap of
// k: O(V log k), where sorting GPT-2's 50257 logits for every token would
// be O(V log V).
func topIDs(logits []float32, k int) []int {
	if k <= 0 || k >= len(logits) {
		ids := make([]int, len(logits))
		for j := range ids {
			ids[j] = j
		}
		return ids
	}
	// less: a is below b (smaller logit, or equal and a later id).
	less := func(a, b int) bool { return logits[a] < logits[b] || (logits[a] == logits[b] && a > b) }
	h := make([]int, 0, k)
	down := func(i int) {
		for {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(h) && less(h[l], h[m]) {
				m = l
			}
			if r < len(h) && less(h[r], h[m]) {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for j := range logits {
		switch {
		case len(h) < k:
			h = append(h, j)
			for i := len(h) - 1; i > 0 && less(h[i], h[(i-1)/2]); i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
		case less(h[0], j):
			h[0] = j
			down(0)
		}
	}
	slices.Sort(h)
	return h
}
