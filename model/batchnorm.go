package model

import (
	"math"
	"math/rand/v2"
)

// BatchNorm2d is torch.nn.BatchNorm2d (eps 1e-5, momentum 0.1, affine,
// tracking running statistics) on NHWC activations (n, h, w, c).
//
// In training the statistics are over the batch; when Mode.Reduce is set
// they are over the global batch of all replicas (synchronised BatchNorm:
// one reduction of per-channel sums in forward, one in backward), so N
// ranks with batch B compute exactly what one process with batch N*B
// does, and every rank updates its running statistics identically. Each
// rank's dx uses the global sums; its weight and bias gradients are local
// sums, which the gradient allreduce then averages: together that is the
// gradient of the global mean loss.
//
// Sums are in float64. The running variance is the unbiased one (count /
// (count-1)), as PyTorch keeps it.
type BatchNorm2d struct {
	p             *Params
	W, B          Tensor // weight (gamma), bias (beta)
	mean, vari    Tensor // running_mean, running_var buffers
	batches       Tensor // num_batches_tracked
	c, hw         int
	mode          *Mode
	bmean, invstd []float64 // statistics of the last training forward
	meanf, invf   []float32 // the same in float, for the kernels
	meanlo        []float32 // mean - meanf: the mean is meanf + meanlo
	count         float64   // global number of values per channel
	sums          []float64
	given         []float32 // the input whose sums a convolution's forward left in sums (Conv2D.statsTo)
	from          *Conv2D   // the convolution whose output this normalises, if it makes the statistics
	relu          bool      // a ReLU fused after the normalisation
	scale         []float32 // per-channel gamma*invstd of the last forward
	ka, kb, kc    []float32 // per-channel terms of dx
}

const (
	bnEps      = 1e-5
	bnMomentum = 0.1
)

// NewBatchNorm2d registers prefix.weight, .bias (c) and the buffers
// .running_mean, .running_var (c) and .num_batches_tracked.
func NewBatchNorm2d(p *Params, mode *Mode, prefix string, c, h, w int) *BatchNorm2d {
	return &BatchNorm2d{
		p: p, mode: mode, c: c, hw: h * w,
		W:       p.Add(prefix+".weight", c),
		B:       p.Add(prefix+".bias", c),
		mean:    p.AddBuffer(prefix+".running_mean", c),
		vari:    p.AddBuffer(prefix+".running_var", c),
		batches: p.AddInt64Buffer(prefix + ".num_batches_tracked"),
		bmean:   make([]float64, c),
		invstd:  make([]float64, c),
		meanf:   make([]float32, c), invf: make([]float32, c), meanlo: make([]float32, c),
		sums:  make([]float64, 2*c+1),
		scale: make([]float32, c),
		ka:    make([]float32, c), kb: make([]float32, c), kc: make([]float32, c),
	}
}

// WithReLU fuses a ReLU after the normalisation (one pass over the
// activations instead of two, each way); Backward then masks dy by the
// output. It returns l.
func (l *BatchNorm2d) WithReLU() *BatchNorm2d {
	l.relu = true
	return l
}

func (l *BatchNorm2d) InSize() int  { return l.hw * l.c }
func (l *BatchNorm2d) OutSize() int { return l.hw * l.c }

// init: weight 1, bias 0, running mean 0, running variance 1, no batches.
func (l *BatchNorm2d) init(*rand.Rand) {
	if l.W.Absent() {
		return
	}
	fill := func(v []float32, x float32) {
		for i := range v {
			v[i] = x
		}
	}
	fill(l.W.Of(l.p.Data), 1)
	fill(l.B.Of(l.p.Data), 0)
	fill(l.mean.Of(l.p.Buffers), 0)
	fill(l.vari.Of(l.p.Buffers), 1)
	*l.p.Int64(l.batches) = 0
}

// Forward normalises each channel of x (n, h, w, c) into y.
func (l *BatchNorm2d) Forward(y, x []float32, n int) {
	mean, scale := l.norm(x, n)
	affine(y, x, mean, scale, l.B.Of(l.p.Data), n*l.hw, l.c, l.relu)
}

// Join sets y = max(l(x) + short, 0), short being z, or sc(z) when sc is
// not nil: the end of a residual block in one pass, without storing
// either normalisation's output (their Backward needs only their
// inputs). l and sc have no fused ReLU.
func (l *BatchNorm2d) Join(y, x []float32, sc *BatchNorm2d, z []float32, n int) {
	mean, scale := l.norm(x, n)
	var zm, zs, zb []float32
	if sc != nil {
		zm, zs = sc.norm(z, n)
		zb = sc.B.Of(sc.p.Data)
	}
	join(y, x, mean, scale, l.B.Of(l.p.Data), z, zm, zs, zb, n*l.hw, l.c)
}

// norm is the per-channel mean and scale (gamma*invstd) that normalise
// x: in training the batch's statistics (over all replicas under
// Mode.Reduce), which it also folds into the running ones; in evaluation
// the running ones.
func (l *BatchNorm2d) norm(x []float32, n int) (mean, scale []float32) {
	C := l.c
	g := l.W.Of(l.p.Data)
	rows := n * l.hw
	scale = l.scale
	given := l.given
	l.given = nil
	if !l.mode.Training {
		rm, rv := l.mean.Of(l.p.Buffers), l.vari.Of(l.p.Buffers)
		for ch := range C {
			scale[ch] = g[ch] / float32(math.Sqrt(float64(rv[ch])+bnEps))
		}
		return rm, scale
	}
	s := l.sums
	if len(given) != rows*C || rows == 0 || &given[0] != &x[0] {
		clear(s)
		bnStats(x, rows, C, s, l.from.statsRows(n))
	}
	s[2*C] = float64(rows)
	if l.mode.Reduce != nil {
		l.mode.Reduce(s)
	}
	m := s[2*C]
	l.count = m
	rm, rv := l.mean.Of(l.p.Buffers), l.vari.Of(l.p.Buffers)
	for ch := range C {
		mean := s[ch] / m
		vari := max(s[C+ch]/m-mean*mean, 0)
		l.bmean[ch] = mean
		l.invstd[ch] = 1 / math.Sqrt(vari+bnEps)
		l.meanf[ch], l.invf[ch] = float32(mean), float32(l.invstd[ch])
		l.meanlo[ch] = float32(mean - float64(l.meanf[ch]))
		scale[ch] = float32(float64(g[ch]) * l.invstd[ch])
		unbiased := vari
		if m > 1 {
			unbiased = vari * m / (m - 1)
		}
		rm[ch] = float32((1-bnMomentum)*float64(rm[ch]) + bnMomentum*mean)
		rv[ch] = float32((1-bnMomentum)*float64(rv[ch]) + bnMomentum*unbiased)
	}
	*l.p.Int64(l.batches)++
	return l.meanf, scale
}

// Backward of training-mode normalisation: dgamma += sum(dy*xhat), dbeta
// += sum(dy) over this rank's batch, and dx = gamma*invstd*(dy -
// sum(dy)/M - xhat*sum(dy*xhat)/M) with sums and M over the global batch.
// With a fused ReLU, dy is first masked where the forward's output was
// positive, which the kernels recompute from x with the forward's mean,
// scale and beta rather than read from y: the same bits (one inline
// expression in C for both), and one activation fewer to read in each
// of the two passes. y is not read.
func (l *BatchNorm2d) Backward(dx, dy, x, _ []float32, n int) {
	C := l.c
	rows := n * l.hw
	s := l.sums[:2*C]
	clear(s)
	beta := l.B.Of(l.p.Data)
	bnGradSums(x, dy, rows, C, l.meanf, l.meanlo, l.invf, l.scale, beta, l.relu, s)
	dg, db := l.W.Of(l.p.Grad), l.B.Of(l.p.Grad)
	for ch := range C {
		db[ch] += float32(s[ch])
		dg[ch] += float32(s[C+ch])
	}
	if dx == nil {
		return
	}
	if l.mode.Reduce != nil {
		l.mode.Reduce(s)
	}
	g := l.W.Of(l.p.Data)
	m := l.count
	// dx = a*dy + b*(x-mean) + c per channel, with xhat expanded.
	a, bx, c0 := l.ka, l.kb, l.kc
	for ch := range C {
		k := float64(g[ch]) * l.invstd[ch]
		mdy, mdyx := s[ch]/m, s[C+ch]/m
		// k*(dy - mdy - (x-mean)*invstd*mdyx)
		a[ch] = float32(k)
		bx[ch] = float32(-k * l.invstd[ch] * mdyx)
		c0[ch] = float32(-k * mdy)
	}
	bnDx(dx, dy, x, rows, C, l.meanf, a, bx, c0, l.scale, beta, l.relu)
}
