package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
)

// GPTBlock is GPT-2's pre-LayerNorm transformer block (Hugging Face's
// GPT2Block): x1 = x + attn(ln_1(x)); y = x1 + mlp(ln_2(x1)), the MLP
// being c_fc (C -> 4C), GELU, c_proj (4C -> C). It keeps its intermediate
// activations for the largest batch seen, as BasicBlock does.
type GPTBlock struct {
	ln1, ln2       *LayerNorm
	attn           *Attention
	fc, proj       *Conv1D
	gelu           *GELU
	t, c, f        int       // f: the MLP's hidden units here (4C unsplit)
	a1, at, x1, a2 []float32 // (n, T, C)
	hid, g         []float32 // (n, T, f)
	d1, d2, dh, dg []float32 // gradient scratch
	batch          int
}

// NewGPTBlock registers block prefix's parameters (prefix.ln_1, .attn,
// .ln_2, .mlp.c_fc, .mlp.c_proj); projStd initialises the two residual
// projections.
func NewGPTBlock(p *Params, prefix string, t, c, heads int, projStd float64) *GPTBlock {
	return newGPTBlock(p, nil, prefix, t, c, heads, projStd, 0, 1)
}

// newGPTBlock is shard of shards of a block (Megatron-LM's tensor
// parallelism): the attention's heads and the MLP's hidden units split,
// the LayerNorms and the residual stream whole on every shard; one sum
// over the shards in forward and one in backward per attention and per
// MLP (mode.TensorReduce).
func newGPTBlock(p *Params, mode *Mode, prefix string, t, c, heads int, projStd float64, shard, shards int) *GPTBlock {
	b := &GPTBlock{t: t, c: c, f: 4 * c / shards}
	b.ln1 = NewLayerNorm(p, prefix+".ln_1", c, t)
	b.attn = newAttention(p, mode, prefix+".attn", t, c, heads, projStd, shard, shards)
	b.ln2 = NewLayerNorm(p, prefix+".ln_2", c, t)
	b.fc = newConv1DShard(p, mode, prefix+".mlp.c_fc", c, 4*c, t, 0.02, byColumns, 1, shard, shards)
	b.gelu = NewGELU(b.f * t)
	b.proj = newConv1DShard(p, mode, prefix+".mlp.c_proj", 4*c, c, t, projStd, byRows, 1, shard, shards)
	return b
}

func (b *GPTBlock) InSize() int  { return b.t * b.c }
func (b *GPTBlock) OutSize() int { return b.t * b.c }

func (b *GPTBlock) init(rng *rand.Rand) {
	for _, l := range []initializer{b.ln1, b.attn.cAttn, b.attn.cProj, b.ln2, b.fc, b.proj} {
		l.init(rng)
	}
}

func (b *GPTBlock) ensure(n int) {
	if n <= b.batch {
		return
	}
	b.batch = n
	tc := n * b.t * b.c
	b.a1, b.at, b.x1, b.a2 = make([]float32, tc), make([]float32, tc), make([]float32, tc), make([]float32, tc)
	tf := n * b.t * b.f
	b.hid, b.g = make([]float32, tf), make([]float32, tf)
	b.d1, b.d2, b.dh, b.dg = make([]float32, tc), make([]float32, tc), make([]float32, tf), make([]float32, tf)
}

// Forward: x and y are (n, T, C).
func (b *GPTBlock) Forward(y, x []float32, n int) {
	b.ensure(n)
	tc := n * b.t * b.c
	b.ln1.Forward(b.a1, x, n)
	b.attn.Forward(b.at, b.a1, n)
	add(b.x1, x, b.at, tc)
	b.ln2.Forward(b.a2, b.x1, n)
	b.fc.Forward(b.hid, b.a2, n)
	b.gelu.Forward(b.g, b.hid, n)
	b.proj.Forward(y, b.g, n)
	add(y, y, b.x1, tc)
}

// Backward: the residual paths carry dy through; each branch adds its own
// (the LayerNorms add their input gradient to the residual's).
func (b *GPTBlock) Backward(dx, dy, x, _ []float32, n int) {
	tc := n * b.t * b.c
	d1, d2 := b.d1[:tc], b.d2[:tc] // d1: the gradient of x1
	b.proj.Backward(b.dg, dy, b.g, nil, n)
	b.gelu.Backward(b.dh, b.dg, b.hid, nil, n)
	b.fc.Backward(d2, b.dh, b.a2, nil, n)
	copyPar(d1, dy[:tc])
	b.ln2.backward(d1, d2, b.x1, n, true)
	b.attn.Backward(d2, d1, b.a1, nil, n)
	if dx == nil {
		b.ln1.Backward(nil, d2, x, nil, n)
		return
	}
	copyPar(dx[:tc], d1)
	b.ln1.backward(dx, d2, x, n, true)
}

func (b *GPTBlock) flops() (fwd, dw, dx int64) {
	for _, l := range []flopCounter{b.attn, b.fc, b.proj} {
		f, w, x := l.flops()
		fwd, dw, dx = fwd+f, dw+w, dx+x
	}
	return fwd, dw, dx
}

// GPT sizes. Vocab is the tokenizer's (50257 for GPT-2's BPE, 256 for
// bytes); the embedding table has VocabPadded rows (llm.c pads 50257 to
// 50304 for the GEMMs), of which only the first Vocab are ever used or
// predicted.
type GPTConfig struct {
	Layers      int `json:"layers"`
	Heads       int `json:"heads"`
	Dim         int `json:"dim"`
	Context     int `json:"context"`
	Vocab       int `json:"vocab"`
	VocabPadded int `json:"vocab_padded"`
}

// GPTPresets are GPT-2's published sizes (context 1024, GPT-2's BPE).
var GPTPresets = map[string]GPTConfig{
	"gpt2":        {Layers: 12, Heads: 12, Dim: 768, Context: 1024},
	"gpt2-medium": {Layers: 24, Heads: 16, Dim: 1024, Context: 1024},
	"gpt2-large":  {Layers: 36, Heads: 20, Dim: 1280, Context: 1024},
	"gpt2-xl":     {Layers: 48, Heads: 25, Dim: 1600, Context: 1024},
}

// PadVocab is llm.c's padded vocabulary: the next multiple of 128 (50257
// -> 50304); small vocabularies are left as they are.
func PadVocab(v int) int {
	if v < 1024 {
		return v
	}
	return (v + 127) / 128 * 128
}

// Validate checks the sizes.
func (g GPTConfig) Validate() error {
	switch {
	case g.Layers < 1 || g.Heads < 1 || g.Dim < 1 || g.Context < 1:
		return fmt.Errorf("--layers %d --heads %d --dim %d --context %d: all must be positive", g.Layers, g.Heads, g.Dim, g.Context)
	case g.Dim%g.Heads != 0:
		return fmt.Errorf("--heads %d does not divide --dim %d: each head takes dim/heads columns", g.Heads, g.Dim)
	case g.Vocab < 1 || g.VocabPadded < g.Vocab:
		return fmt.Errorf("vocabulary %d (padded %d): want a positive vocabulary, padded to at least itself", g.Vocab, g.VocabPadded)
	}
	return nil
}

// buildGPT is GPT-2 (Radford et al. 2019) as Hugging Face's
// GPT2LMHeadModel names it: transformer.wte and .wpe, blocks
// transformer.h.0 .. h.L-1, transformer.ln_f, and the head tied to wte.
// A sample is Context token ids; its output the logits of every position
// (Context, Vocab): Positions() rows of Classes() each.
func (m *Model) buildGPT() error {
	g := m.Config.GPT
	if g == nil {
		return fmt.Errorf("model: gpt without sizes")
	}
	if err := g.Validate(); err != nil {
		return err
	}
	p := m.Params
	t, c := g.Context, g.Dim
	emb := NewEmbedding(p, "transformer", g.VocabPadded, t, c)
	m.add(emb, 0)
	proj := 0.02 / math.Sqrt(float64(2*g.Layers))
	for i := range g.Layers {
		before := p.Len()
		m.add(newGPTBlock(p, m.Mode, fmt.Sprintf("transformer.h.%d", i), t, c, g.Heads, proj, m.part.Shard, max(m.part.Shards, 1)), before)
	}
	before := p.Len()
	m.add(NewLayerNorm(p, "transformer.ln_f", c, t), before)
	head := len(m.all)
	before = p.Len()
	if m.part.holds(head) && !m.part.holds(0) {
		// The last pipeline stage keeps its own copy of the tied table,
		// drawn as the first stage draws it (Init walks the embedding
		// into it); the two stages sum their gradients of it each step.
		emb.WTE = p.AddCopy("transformer.wte.weight", g.VocabPadded, c)
	}
	m.add(NewTiedHead(emb, c, g.Vocab, t), before)
	if m.part.holds(0) {
		p.Tie("lm_head.weight", emb.WTE)
	}
	m.positions, m.wideLoss = t, m.part.holds(head)
	return nil
}

// FLOPsPerToken is the model FLOPs of training on one token as nanoGPT
// and PaLM (Chowdhery et al. 2022, appendix B) count them for MFU: 6N
// for the parameters' forward and backward matrix products, N without
// the position embedding, plus 12 L C T for the attention's QK^T and AV.
// The yardstick of `train bench step`'s MFU.
func (m *Model) FLOPsPerToken() float64 {
	g := m.Config.GPT
	if g == nil {
		return 0
	}
	n := m.Params.Len() - g.Context*g.Dim
	return 6*float64(n) + 12*float64(g.Layers)*float64(g.Dim)*float64(g.Context)
}

// FitWeights says whether GPT-2 weights of another shape go into t by
// their leading rows (checkpoint.Fit): the token table with the real or
// the padded vocabulary (Hugging Face saves 50257 rows, llm.c 50304), and
// a position table at least as long as the context (GPT-2's 1024 cut to
// the context trained, as nanoGPT's crop_block_size). Any other mismatch
// is not fitted; a vocabulary of other size is an error of its own.
func (m *Model) FitWeights(t Tensor, shape []int) (bool, error) {
	g := m.Config.GPT
	if g == nil || len(shape) != 2 || len(t.Shape) != 2 || shape[1] != t.Shape[1] {
		return false, nil
	}
	switch t.Name {
	case "transformer.wte.weight":
		if shape[0] == g.Vocab || shape[0] == g.VocabPadded {
			return true, nil
		}
		return false, fmt.Errorf("its token embedding has %d rows, and the data's vocabulary is %d (%d rows padded): the weights were trained with another tokenizer; tokenize the text with theirs (train tokenize; --bytes for 256)",
			shape[0], g.Vocab, g.VocabPadded)
	case "transformer.wpe.weight":
		if shape[0] >= g.Context {
			return true, nil
		}
		return false, fmt.Errorf("its position embedding has %d rows, fewer than --context %d: train with --context %d or less", shape[0], g.Context, shape[0])
	}
	return false, nil
}

// IgnoreWeight says which tensors of a GPT-2 file are not weights:
// Hugging Face's causal-mask buffers h.N.attn.bias and .masked_bias
// (the mask is in the attention's code here).
func IgnoreWeight(name string) bool {
	return gptMask.MatchString(name)
}

var gptMask = regexp.MustCompile(`^(transformer\.)?h\.\d+\.attn\.(masked_)?bias$`)
