package model

// The layers of the GPT-2 family (gpt.go), named and laid out as Hugging
// Face's GPT2LMHeadModel: token and position embeddings, LayerNorm, the
// Conv1D linear maps (weights stored in x out), GELU (tanh approximation)
// and the head tied to the token embedding. Activations are rows of C
// values, one per position: a sample of T positions is (T, C).

import "math/rand/v2"

// Embedding is GPT-2's input: token embedding wte (vocab rows, C) plus
// position embedding wpe (T, C). Its input is T token ids per sample as
// float32 (exact below 2^24), its output (T, C). Ids are checked by the
// data reader (below the vocabulary) and again before the C kernels use
// them.
type Embedding struct {
	p          *Params
	WTE, WPE   Tensor
	t, c, rows int // positions, width, wte's rows (the padded vocabulary)
}

// NewEmbedding registers prefix.wte.weight (rows, c) and prefix.wpe.weight
// (t, c).
func NewEmbedding(p *Params, prefix string, rows, t, c int) *Embedding {
	return &Embedding{p: p, WTE: p.Add(prefix+".wte.weight", rows, c), WPE: p.Add(prefix+".wpe.weight", t, c), t: t, c: c, rows: rows}
}

func (e *Embedding) InSize() int  { return e.t }
func (e *Embedding) OutSize() int { return e.t * e.c }

// init draws both from N(0, 0.02), GPT-2's initializer_range.
func (e *Embedding) init(rng *rand.Rand) {
	e.p.InitBuf(e.WTE, e.p.Data, func(v []float32) { normal(rng, v, 0.02) })
	e.p.InitBuf(e.WPE, e.p.Data, func(v []float32) { normal(rng, v, 0.02) })
}

// Forward: y[s,t,:] = wte[x[s,t]] + wpe[t].
func (e *Embedding) Forward(y, x []float32, n int) {
	embed(y, x, e.WTE.Of(e.p.Data), e.WPE.Of(e.p.Data), n*e.t, e.t, e.c)
}

// Backward adds dy into the rows of the tokens and positions used; there
// is no input gradient (token ids).
func (e *Embedding) Backward(_, dy, x, _ []float32, n int) {
	embedBackward(e.WTE.Of(e.p.Grad), e.WPE.Of(e.p.Grad), dy, x, n*e.t, e.t, e.c)
}

// normal fills v from N(0, std).
func normal(rng *rand.Rand, v []float32, std float64) {
	for i := range v {
		v[i] = float32(rng.NormFloat64() * std)
	}
}

// LayerNorm is torch.nn.LayerNorm(c, eps=1e-5) over rows of c values:
// y = (x - mean) / sqrt(var + eps) * weight + bias, var biased. It keeps
// each row's mean and 1/sqrt(var + eps) of the last Forward for Backward
// (8 bytes a row, where the normalised rows would take 4c).
type LayerNorm struct {
	p          *Params
	W, B       Tensor
	c, per     int // width, rows per sample
	mean, rstd []float32
}

const lnEps = 1e-5

// NewLayerNorm registers prefix.weight and prefix.bias (c) for samples of
// per rows.
func NewLayerNorm(p *Params, prefix string, c, per int) *LayerNorm {
	return &LayerNorm{p: p, W: p.Add(prefix+".weight", c), B: p.Add(prefix+".bias", c), c: c, per: per}
}

func (l *LayerNorm) InSize() int  { return l.c * l.per }
func (l *LayerNorm) OutSize() int { return l.c * l.per }

func (l *LayerNorm) init(*rand.Rand) {
	if l.W.Absent() {
		return
	}
	w := l.W.Of(l.p.Data)
	for i := range w {
		w[i] = 1
	}
	clear(l.B.Of(l.p.Data))
}

// Forward: x and y are (n*per, c).
func (l *LayerNorm) Forward(y, x []float32, n int) {
	rows := n * l.per
	if len(l.mean) < rows {
		l.mean, l.rstd = make([]float32, rows), make([]float32, rows)
	}
	layerNorm(y, l.mean, l.rstd, x, l.W.Of(l.p.Data), l.B.Of(l.p.Data), rows, l.c)
}

// Backward: with xhat = (x - mean) rstd and g = dy weight,
// dx = rstd (g - mean(g) - xhat mean(g xhat)); dweight += dy xhat;
// dbias += dy.
func (l *LayerNorm) Backward(dx, dy, x, _ []float32, n int) {
	l.backward(dx, dy, x, n, false)
}

// backward sets dx, or adds to it with add (a residual join's gradient).
func (l *LayerNorm) backward(dx, dy, x []float32, n int, add bool) {
	layerNormBackward(dx, l.W.Of(l.p.Grad), l.B.Of(l.p.Grad), dy, x, l.W.Of(l.p.Data), l.mean, l.rstd, n*l.per, l.c, add)
}

// Conv1D is Hugging Face's Conv1D, GPT-2's linear map: y = x W + b with W
// stored (in, out), the transpose of torch.nn.Linear's layout.
type Conv1D struct {
	p            *Params
	W, B         Tensor
	in, out, per int     // this shard's
	std          float64 // initialisation: N(0, std), bias 0
	par          parallel
	mode         *Mode // its TensorReduce sums over the shards
}

// parallel is how a tensor-parallel shard holds a linear map (Megatron-LM,
// Shoeybi et al. 2019).
type parallel uint8

const (
	unsplit parallel = iota
	// byColumns: the output columns (and bias) are split; each shard
	// computes its slice from the whole input, and the input's gradient
	// is the sum of the shards' (one allreduce in backward).
	byColumns
	// byRows: the input rows are split; the shards' outputs are summed
	// (one allreduce in forward), then the bias, whole on every shard,
	// added.
	byRows
)

// NewConv1D registers prefix.weight (in, out) and prefix.bias (out) for
// samples of per rows, initialised from N(0, std).
func NewConv1D(p *Params, prefix string, in, out, per int, std float64) *Conv1D {
	return &Conv1D{p: p, W: p.Add(prefix+".weight", in, out), B: p.Add(prefix+".bias", out), in: in, out: out, per: per, std: std}
}

// newConv1DShard is shard of shards of a Conv1D split as par says;
// byColumns with groups > 1 splits each of groups blocks of the columns
// (c_attn's q, k and v) alike.
func newConv1DShard(p *Params, mode *Mode, prefix string, in, out, per int, std float64, par parallel, groups, shard, shards int) *Conv1D {
	if shards <= 1 {
		return NewConv1D(p, prefix, in, out, per, std)
	}
	l := &Conv1D{p: p, in: in, out: out, per: per, std: std, par: par, mode: mode}
	if par == byColumns {
		l.W = p.AddSplit(prefix+".weight", Split{Dim: 1, Groups: groups, Part: shard, Parts: shards}, in, out)
		l.B = p.AddSplit(prefix+".bias", Split{Dim: 0, Groups: groups, Part: shard, Parts: shards}, out)
		l.out = out / shards
	} else {
		l.W = p.AddSplit(prefix+".weight", Split{Dim: 0, Groups: 1, Part: shard, Parts: shards}, in, out)
		l.B = p.Add(prefix+".bias", out)
		l.in = in / shards
	}
	return l
}

func (l *Conv1D) InSize() int  { return l.in * l.per }
func (l *Conv1D) OutSize() int { return l.out * l.per }

func (l *Conv1D) init(rng *rand.Rand) {
	l.p.InitBuf(l.W, l.p.Data, func(v []float32) { normal(rng, v, l.std) })
	if !l.B.Absent() {
		clear(l.B.Of(l.p.Data))
	}
}

// Forward: x is (rows, in), y (rows, out).
func (l *Conv1D) Forward(y, x []float32, n int) {
	rows := n * l.per
	b := l.B.Of(l.p.Data)
	if l.par == byRows {
		sgemm(false, false, rows, l.out, l.in, 1, x, l.in, l.W.Of(l.p.Data), l.out, 0, y, l.out)
		l.mode.TensorReduce(y[:rows*l.out])
		addRows(y, b, rows, l.out)
		return
	}
	fillRows(y, b, rows, l.out)
	sgemm(false, false, rows, l.out, l.in, 1, x, l.in, l.W.Of(l.p.Data), l.out, 1, y, l.out)
}

// Backward: dW += x^T dy, db += column sums of dy, dx = dy W^T.
func (l *Conv1D) Backward(dx, dy, x, _ []float32, n int) {
	rows := n * l.per
	sgemm(true, false, l.in, l.out, rows, 1, x, l.in, dy, l.out, 1, l.W.Of(l.p.Grad), l.out)
	colSum(l.B.Of(l.p.Grad), dy, rows, l.out)
	if dx != nil {
		sgemm(false, true, rows, l.in, l.out, 1, dy, l.out, l.W.Of(l.p.Data), l.out, 0, dx, l.in)
		if l.par == byColumns {
			l.mode.TensorReduce(dx[:rows*l.in])
		}
	}
}

func (l *Conv1D) flops() (fwd, dw, dx int64) {
	f := 2 * int64(l.in) * int64(l.out) * int64(l.per)
	return f, f, f
}

// GELU is GPT-2's activation, the tanh approximation (torch's
// gelu(approximate="tanh")): y = x/2 (1 + tanh(k (x + 0.044715 x^3))),
// k = sqrt(2/pi).
type GELU struct{ size int }

// NewGELU returns a GELU over size values per sample.
func NewGELU(size int) *GELU { return &GELU{size} }

func (g *GELU) InSize() int  { return g.size }
func (g *GELU) OutSize() int { return g.size }

func (g *GELU) Forward(y, x []float32, n int) { gelu(y, x, n*g.size) }

// Backward: dy times d/dx, with th = tanh(k (x + 0.044715 x^3)):
// (1 + th)/2 + x/2 (1 - th^2) k (1 + 3 0.044715 x^2).
func (g *GELU) Backward(dx, dy, x, _ []float32, n int) {
	if dx != nil {
		geluBackward(dx, dy, x, n*g.size)
	}
}

// TiedHead is GPT-2's language-model head: logits = x wte^T over the first
// vocab rows of the token embedding (the rows past it pad the table for
// speed, as llm.c's 50304, and are never predicted). It owns no
// parameters: its gradient goes into wte's.
type TiedHead struct {
	e        *Embedding
	c, vocab int
	per      int
}

// NewTiedHead predicts vocab tokens from e's table, for samples of per
// rows of c values.
func NewTiedHead(e *Embedding, c, vocab, per int) *TiedHead {
	return &TiedHead{e: e, c: c, vocab: vocab, per: per}
}

// tied is the table the head reads (Model.LayerRanges).
func (h *TiedHead) tied() Tensor { return h.e.WTE }

func (h *TiedHead) InSize() int  { return h.c * h.per }
func (h *TiedHead) OutSize() int { return h.vocab * h.per }

// Forward: x (rows, c), logits (rows, vocab).
func (h *TiedHead) Forward(y, x []float32, n int) {
	wte := h.e.WTE.Of(h.e.p.Data)
	sgemm(false, true, n*h.per, h.vocab, h.c, 1, x, h.c, wte, h.c, 0, y, h.vocab)
}

// Backward: dwte[:vocab] += dlogits^T x; dx = dlogits wte[:vocab].
func (h *TiedHead) Backward(dx, dy, x, _ []float32, n int) {
	rows := n * h.per
	dw := gemm{true, false, h.vocab, h.c, rows, 1, dy, h.vocab, x, h.c, 1, h.e.WTE.Of(h.e.p.Grad), h.c}
	if dx == nil {
		dw.run()
		return
	}
	// One pass: dx cut one part a thread, dW's 50,257 rows taken as the
	// threads finish (par.c's k_sgemm_pair).
	sgemmPair(gemm{false, false, rows, h.c, h.vocab, 1, dy, h.vocab, h.e.WTE.Of(h.e.p.Data), h.c, 0, dx, h.c}, dw)
}

func (h *TiedHead) flops() (fwd, dw, dx int64) {
	f := 2 * int64(h.c) * int64(h.vocab) * int64(h.per)
	return f, f, f
}
