package model

import (
	"math/rand/v2"
	"slices"
	"testing"

	"train/internal/near"
)

// tiny are the sizes of the GPT tests: 2 samples of 4 positions, width 8,
// 2 heads, a vocabulary of 11 in a table of 13 rows (2 rows of padding).
const (
	tn, tt, tc, th, tv, tvp = 2, 4, 8, 2, 11, 13
)

func ids(rng *rand.Rand, n, v int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.IntN(v))
	}
	return x
}

// TestTransformerLayersGrad: every GPT layer's analytic gradients (input
// and parameters) against central differences.
func TestTransformerLayersGrad(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, tn*tt*tc)
	randn(rng, x)
	for _, tc0 := range []struct {
		name string
		make func(p *Params) Layer
	}{
		{"LayerNorm", func(p *Params) Layer { return NewLayerNorm(p, "ln", tc, tt) }},
		{"Conv1D", func(p *Params) Layer { return NewConv1D(p, "c", tc, 3, tt*tc/tc, 0.5) }},
		{"GELU", func(p *Params) Layer { return NewGELU(tt * tc) }},
		{"Attention", func(p *Params) Layer { return NewAttention(p, "attn", tt, tc, th, 0.3) }},
		{"GPTBlock", func(p *Params) Layer { return NewGPTBlock(p, "h.0", tt, tc, th, 0.3) }},
	} {
		p := &Params{}
		l := tc0.make(p)
		p.Alloc()
		randn(rng, p.Data) // not the layers' init: every weight and bias away from 0 and 1
		in := x
		if l.InSize() != tt*tc {
			in = make([]float32, tn*l.InSize())
			randn(rng, in)
		}
		checkLayer(t, tc0.name, l, p, in, tn)
	}
	// The embedding (ids in, no input gradient) and the tied head.
	p := &Params{}
	e := NewEmbedding(p, "transformer", tvp, tt, tc)
	head := NewTiedHead(e, tc, tv, tt)
	p.Alloc()
	randn(rng, p.Data)
	checkGrads(t, "Embedding", e, p, ids(rng, tn*tt, tv), tn, fdEps, false)
	checkLayer(t, "TiedHead", head, p, x, tn)
}

// tinyGPT is a 2-layer GPT of the test sizes with its initial parameters.
func tinyGPT(t *testing.T) *Model {
	t.Helper()
	m, err := Build(Config{Kind: "gpt", Classes: tv, GPT: &GPTConfig{Layers: 2, Heads: th, Dim: tc, Context: tt, Vocab: tv, VocabPadded: tvp}})
	if err != nil {
		t.Fatal(err)
	}
	m.Init(7)
	return m
}

// TestGPTGrad: the whole model's gradient of the mean cross-entropy over
// all positions against central differences, every parameter; the
// padding rows of the token table get no gradient, and the loss at
// initialisation is near log(vocab) (the logits start near zero).
func TestGPTGrad(t *testing.T) {
	m := tinyGPT(t)
	rng := rand.New(rand.NewPCG(8, 9))
	x := ids(rng, tn*tt, tv)
	labels := make([]int32, tn*tt)
	for i := range labels {
		labels[i] = int32(rng.IntN(tv))
	}
	rows := tn * m.Positions()
	lossAt := func() float64 {
		l, _ := m.Loss(nil, m.Forward(x, tn), labels, rows)
		return l
	}
	p := m.Params
	clear(p.Grad)
	logits := m.Forward(x, tn)
	loss, _ := m.Loss(m.LossGrad(tn), logits, labels, rows)
	if !near.Close(2.3979, loss, 0, 0.05) { // log(11)
		t.Errorf("loss at initialisation %v, want about log(11) = 2.398", loss)
	}
	m.Backward(tn)
	const eps = 1e-3
	for i := range p.Data {
		old := p.Data[i]
		p.Data[i] = old + eps
		up := lossAt()
		p.Data[i] = old - eps
		down := lossAt()
		p.Data[i] = old
		if num := (up - down) / (2 * eps); !near.Close(num, float64(p.Grad[i]), fdRel, 2e-4) {
			t.Errorf("param %d: analytic %v, numeric %v", i, p.Grad[i], num)
		}
	}
	wte, _ := p.Lookup("transformer.wte.weight")
	if pad := wte.Of(p.Grad)[tv*tc:]; slices.ContainsFunc(pad, func(v float32) bool { return v != 0 }) {
		t.Errorf("the padding rows of wte got gradients: %v", pad)
	}
}

// TestGPTLayout: Hugging Face's GPT2LMHeadModel names and shapes, Conv1D
// weights in x out, in forward order.
func TestGPTLayout(t *testing.T) {
	m := tinyGPT(t)
	var got []string
	for _, tn := range m.Params.Tensors {
		got = append(got, tn.Name+" "+shape(tn.Shape))
	}
	want := []string{"transformer.wte.weight 13x8", "transformer.wpe.weight 4x8"}
	for i := range 2 {
		pre := "transformer.h." + string(rune('0'+i)) + "."
		want = append(want, pre+"ln_1.weight 8", pre+"ln_1.bias 8", pre+"attn.c_attn.weight 8x24", pre+"attn.c_attn.bias 24",
			pre+"attn.c_proj.weight 8x8", pre+"attn.c_proj.bias 8", pre+"ln_2.weight 8", pre+"ln_2.bias 8",
			pre+"mlp.c_fc.weight 8x32", pre+"mlp.c_fc.bias 32", pre+"mlp.c_proj.weight 32x8", pre+"mlp.c_proj.bias 8")
	}
	want = append(want, "transformer.ln_f.weight 8", "transformer.ln_f.bias 8")
	if !slices.Equal(got, want) {
		t.Errorf("tensors:\n%v\nwant\n%v", got, want)
	}
	for _, bad := range []GPTConfig{{Layers: 1, Heads: 3, Dim: 8, Context: 4, Vocab: 11, VocabPadded: 11}, {Layers: 0, Heads: 1, Dim: 8, Context: 4, Vocab: 11, VocabPadded: 11}} {
		if _, err := Build(Config{Kind: "gpt", Classes: 11, GPT: &bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if PadVocab(50257) != 50304 || PadVocab(256) != 256 {
		t.Errorf("PadVocab: %d, %d", PadVocab(50257), PadVocab(256))
	}
}

func shape(s []int) string {
	out := ""
	for i, d := range s {
		if i > 0 {
			out += "x"
		}
		out += itoa(d)
	}
	return out
}

func itoa(d int) string {
	if d < 10 {
		return string(rune('0' + d))
	}
	return itoa(d/10) + string(rune('0'+d%10))
}

// TestGPTStepAllocates nothing: after the first step has sized every
// buffer, a training step (forward, loss and its gradient, backward)
// allocates no Go memory, so a long run puts no load on the garbage
// collector; on one thread or several (the C pool of par.c).
func TestGPTStepAllocatesNothing(t *testing.T) {
	m := tinyGPT(t)
	rng := rand.New(rand.NewPCG(3, 4))
	x := ids(rng, tn*tt, tv)
	labels := make([]int32, tn*tt)
	for i := range labels {
		labels[i] = int32(rng.IntN(tv))
	}
	step := func() {
		clear(m.Params.Grad)
		logits := m.Forward(x, tn)
		m.Loss(m.LossGrad(tn), logits, labels, tn*tt)
		m.Backward(tn)
	}
	for _, threads := range []int{1, 3} {
		SetThreads(threads)
		step()
		if n := testing.AllocsPerRun(5, step); n != 0 {
			t.Errorf("a GPT step on %d thread(s) allocates %v times, want 0", threads, n)
		}
	}
	SetThreads(1)
}
