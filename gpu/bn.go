package gpu

import "train/model"

// bn is model.BatchNorm2d on the GPU (NCHW), with the same arithmetic:
// statistics summed in double, the mean kept as a float pair hi + lo, the
// running statistics updated with the unbiased variance. With
// Mode.Reduce set (synchronised BatchNorm across ranks) the per-channel
// sums travel to the host for the reduction and back; otherwise
// everything stays on the device.
type bn struct {
	c                          *Ctx
	s                          model.Spec
	mode                       *model.Mode
	gamma, beta, dgamma, dbeta *Buf
	rmean, rvar                *Buf
	batches                    dptr
	sums                       *Buf // 2C doubles
	mhi, mlo, invstd, scale    *Buf
	ka, kb, kc                 *Buf
	count                      float64
	host                       []float64
}

const (
	bnEps      = 1e-5
	bnMomentum = 0.1
)

func (n *Net) bn(s model.Spec) *bn {
	C := s.OutC
	c := n.ctx
	l := &bn{c: c, s: s, mode: n.m.Mode,
		gamma: n.P.Slice(s.W.Offset, C), beta: n.P.Slice(s.B.Offset, C),
		dgamma: n.G.Slice(s.W.Offset, C), dbeta: n.G.Slice(s.B.Offset, C),
		rmean: n.B.Slice(s.Mean.Offset, C), rvar: n.B.Slice(s.Var.Offset, C),
		batches: n.B.ptr + dptr(4*s.Batches.Offset),
		sums:    c.MustAlloc(4 * C),
		mhi:     c.MustAlloc(C), mlo: c.MustAlloc(C), invstd: c.MustAlloc(C), scale: c.MustAlloc(C),
		ka: c.MustAlloc(C), kb: c.MustAlloc(C), kc: c.MustAlloc(C),
		host: make([]float64, 2*C+1),
	}
	return l
}

// reduce sums the first k doubles of l.sums (and a count) across ranks
// through the host; it returns the global count.
func (l *bn) reduce(k int, count float64) float64 {
	h := l.host[:k+1]
	if err := l.sums.download64(h[:k]); err != nil {
		return count
	}
	h[k] = count
	l.mode.Reduce(h)
	l.c.fail(l.sums.upload64(h[:k]))
	return h[k]
}

func (l *bn) forward(y, x *Buf, n int) {
	C, hw := l.s.OutC, l.s.OutH*l.s.OutW
	c := l.c
	if !l.mode.Training {
		c.launch("bn_eval_scale", int64(C), l.scale, l.gamma, l.rvar, C, float32(bnEps))
		c.launch("bn_apply", int64(n*C*hw), y, x, l.rmean, l.scale, l.beta, n, C, hw, l.s.ReLU)
		return
	}
	l.sums.Zero()
	c.launchGrid("bn_stats", chanGrid(n*hw), uint(C), 256, l.sums, x, n, C, hw)
	m := float64(n * hw)
	if l.mode.Reduce != nil {
		m = l.reduce(2*C, m)
	}
	l.count = m
	c.launch("bn_finalize", int64(C), l.sums, m, l.gamma, l.rmean, l.rvar, l.mhi, l.mlo, l.invstd, l.scale, C, float64(bnMomentum), float64(bnEps))
	c.launchGrid("inc_i64", 1, 1, 1, l.batches)
	c.launch("bn_apply", int64(n*C*hw), y, x, l.mhi, l.scale, l.beta, n, C, hw, l.s.ReLU)
}

func (l *bn) backward(dx, dy, x, y *Buf, n int) {
	C, hw := l.s.OutC, l.s.OutH*l.s.OutW
	c := l.c
	l.sums.Zero()
	c.launchGrid("bn_grad_sums", chanGrid(n*hw), uint(C), 256, l.sums, x, dy, y, l.mhi, l.mlo, l.invstd, n, C, hw, l.s.ReLU)
	c.launch("bn_param_grads", int64(C), l.dgamma, l.dbeta, l.sums, C)
	if dx == nil {
		return
	}
	if l.mode.Reduce != nil {
		l.reduce(2*C, 0)
	}
	c.launch("bn_dx_coef", int64(C), l.ka, l.kb, l.kc, l.sums, l.gamma, l.invstd, C, l.count)
	c.launch("bn_dx", int64(n*C*hw), dx, dy, x, y, l.mhi, l.ka, l.kb, l.kc, n, C, hw, l.s.ReLU)
}
