package model

import "math"

// Attention is GPT-2's causal multi-head self-attention (Hugging Face's
// GPT2Attention): qkv = c_attn(x), per head softmax(q k^T / sqrt(hd)) over
// the positions up to each one, times v; the heads side by side, then
// c_proj. Samples are (T, C); the heads split C in hd = C/H columns each.
// It keeps, for the largest batch seen, what backward needs: qkv, the
// attention probabilities (H x T x T per sample) and the heads' output.
//
// Under tensor parallelism a shard holds H/shards of the heads: c_attn's
// q, k and v columns of its heads, c_proj's rows of them (newAttention).
type Attention struct {
	cAttn, cProj *Conv1D
	t, c, h, hd  int // h: this shard's heads
	cl           int // the heads' width here, h x hd (C unsplit)
	scale        float32
	qkv, p, o    []float32 // (n, T, 3cl), (n, h, T, T), (n, T, cl)
	dqkv, do     []float32 // their gradients (dP is the pool's per-thread scratch)
	batch        int
}

// NewAttention registers prefix.c_attn (C -> 3C) and prefix.c_proj (C ->
// C, initialised with projStd: GPT-2 scales the residual projections'
// initialisation by 1/sqrt(2 layers)).
func NewAttention(p *Params, prefix string, t, c, heads int, projStd float64) *Attention {
	return newAttention(p, nil, prefix, t, c, heads, projStd, 0, 1)
}

// newAttention is shard of shards of the attention: c_attn split by
// columns (in q, k and v blocks), c_proj by rows.
func newAttention(p *Params, mode *Mode, prefix string, t, c, heads int, projStd float64, shard, shards int) *Attention {
	hd := c / heads
	h := heads / shards
	return &Attention{
		cAttn: newConv1DShard(p, mode, prefix+".c_attn", c, 3*c, t, 0.02, byColumns, 3, shard, shards),
		cProj: newConv1DShard(p, mode, prefix+".c_proj", c, c, t, projStd, byRows, 1, shard, shards),
		t:     t, c: c, h: h, hd: hd, cl: h * hd, scale: float32(1 / math.Sqrt(float64(hd))),
	}
}

func (a *Attention) InSize() int  { return a.t * a.c }
func (a *Attention) OutSize() int { return a.t * a.c }

func (a *Attention) ensure(n int) {
	if n <= a.batch {
		return
	}
	a.batch = n
	tc, tt := a.t*a.cl, a.h*a.t*a.t
	a.qkv, a.dqkv = make([]float32, n*3*tc), make([]float32, n*3*tc)
	a.p = make([]float32, n*tt)
	a.o, a.do = make([]float32, n*tc), make([]float32, n*tc)
}

// Forward: x and y are (n, T, C).
func (a *Attention) Forward(y, x []float32, n int) {
	a.ensure(n)
	a.cAttn.Forward(a.qkv, x, n)
	// Per sample and head: scores (T, T) = q k^T / sqrt(hd) (only j <= i
	// used), their causal softmax P, and P v; the heads across the threads.
	attentionForward(a.o, a.p, a.qkv, n, a.t, a.cl, a.h, a.scale)
	a.cProj.Forward(y, a.o, n)
}

// Backward, per sample and head, with P the probabilities, dO the heads'
// output gradient: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)) /
// sqrt(hd), dQ = dS K, dK = dS^T Q; then c_attn's backward.
func (a *Attention) Backward(dx, dy, x, _ []float32, n int) {
	a.cProj.Backward(a.do, dy, a.o, nil, n)
	attentionBackward(a.dqkv, a.do, a.qkv, a.p, n, a.t, a.cl, a.h, a.scale)
	a.cAttn.Backward(dx, a.dqkv[:n*a.t*3*a.cl], x, nil, n)
}

// flops: the two maps, and per head QK^T and PV (2 T^2 hd each way).
func (a *Attention) flops() (fwd, dw, dx int64) {
	mf, mw, mx := a.cAttn.flops()
	pf, pw, px := a.cProj.flops()
	att := 4 * int64(a.t) * int64(a.t) * int64(a.cl) // QK^T and PV over this shard's heads
	return mf + pf + att, mw + pw + att, mx + px + att
}
