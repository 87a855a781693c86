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
	dqkv, dp, do []float32 // their gradients
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
	a.p, a.dp = make([]float32, n*tt), make([]float32, a.t*a.t)
	a.o, a.do = make([]float32, n*tc), make([]float32, n*tc)
}

// Forward: x and y are (n, T, C).
func (a *Attention) Forward(y, x []float32, n int) {
	a.ensure(n)
	t, c, hd, c3 := a.t, a.cl, a.hd, 3*a.cl
	a.cAttn.Forward(a.qkv, x, n)
	for s := range n {
		qkv, o := a.qkv[s*t*c3:], a.o[s*t*c:]
		for h := range a.h {
			q, k, v := qkv[h*hd:], qkv[c+h*hd:], qkv[2*c+h*hd:]
			p := a.p[(s*a.h+h)*t*t:][:t*t]
			// scores (T, T) = q k^T / sqrt(hd); only j <= i is used.
			sgemm(false, true, t, t, hd, a.scale, q, c3, k, c3, 0, p, t)
			causalSoftmax(p, t)
			sgemm(false, false, t, hd, t, 1, p, t, v, c3, 0, o[h*hd:], c)
		}
	}
	a.cProj.Forward(y, a.o, n)
}

// Backward, per sample and head, with P the probabilities, dO the heads'
// output gradient: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)) /
// sqrt(hd), dQ = dS K, dK = dS^T Q; then c_attn's backward.
func (a *Attention) Backward(dx, dy, x, _ []float32, n int) {
	t, c, hd, c3 := a.t, a.cl, a.hd, 3*a.cl
	a.cProj.Backward(a.do, dy, a.o, nil, n)
	for s := range n {
		qkv, dqkv, do := a.qkv[s*t*c3:], a.dqkv[s*t*c3:], a.do[s*t*c:]
		for h := range a.h {
			q, k, v := qkv[h*hd:], qkv[c+h*hd:], qkv[2*c+h*hd:]
			dq, dk, dv := dqkv[h*hd:], dqkv[c+h*hd:], dqkv[2*c+h*hd:]
			p, dp := a.p[(s*a.h+h)*t*t:][:t*t], a.dp
			sgemm(true, false, t, hd, t, 1, p, t, do[h*hd:], c, 0, dv, c3)
			sgemm(false, true, t, t, hd, 1, do[h*hd:], c, v, c3, 0, dp, t)
			causalSoftmaxBackward(dp, p, t, a.scale)
			sgemm(false, false, t, hd, t, 1, dp, t, k, c3, 0, dq, c3)
			sgemm(true, false, t, hd, t, 1, dp, t, q, c3, 0, dk, c3)
		}
	}
	a.cAttn.Backward(dx, a.dqkv[:n*t*c3], x, nil, n)
}

// flops: the two maps, and per head QK^T and PV (2 T^2 hd each way).
func (a *Attention) flops() (fwd, dw, dx int64) {
	mf, mw, mx := a.cAttn.flops()
	pf, pw, px := a.cProj.flops()
	att := 4 * int64(a.t) * int64(a.t) * int64(a.cl) // QK^T and PV over this shard's heads
	return mf + pf + att, mw + pw + att, mx + px + att
}
