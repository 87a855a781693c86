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
	count         float64   // global number of values per channel
	sums          []float64
	relu          bool      // a ReLU fused after the normalisation
	scale, shift  []float32 // per-channel affine of the last forward
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
		sums:    make([]float64, 2*c+1),
		scale:   make([]float32, c), shift: make([]float32, c),
		ka: make([]float32, c), kb: make([]float32, c), kc: make([]float32, c),
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
	C := l.c
	g, b := l.W.Of(l.p.Data), l.B.Of(l.p.Data)
	rows := n * l.hw
	scale, shift := l.scale, l.shift
	if !l.mode.Training {
		rm, rv := l.mean.Of(l.p.Buffers), l.vari.Of(l.p.Buffers)
		for ch := range C {
			s := g[ch] / float32(math.Sqrt(float64(rv[ch])+bnEps))
			scale[ch], shift[ch] = s, b[ch]-rm[ch]*s
		}
		affine(y, x, scale, shift, rows, C, l.relu)
		return
	}
	s := l.sums
	clear(s)
	for r := range rows {
		for ch, v := range x[r*C : (r+1)*C] {
			s[ch] += float64(v)
			s[C+ch] += float64(v) * float64(v)
		}
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
		sc := float64(g[ch]) * l.invstd[ch]
		scale[ch], shift[ch] = float32(sc), float32(float64(b[ch])-mean*sc)
		unbiased := vari
		if m > 1 {
			unbiased = vari * m / (m - 1)
		}
		rm[ch] = float32((1-bnMomentum)*float64(rm[ch]) + bnMomentum*mean)
		rv[ch] = float32((1-bnMomentum)*float64(rv[ch]) + bnMomentum*unbiased)
	}
	*l.p.Int64(l.batches)++
	affine(y, x, scale, shift, rows, C, l.relu)
}

// affine sets y = x*scale + shift per channel over rows of C values, then
// max(y, 0) with relu.
func affine(y, x, scale, shift []float32, rows, C int, relu bool) {
	for r := range rows {
		xr, yr := x[r*C:(r+1)*C], y[r*C:(r+1)*C]
		if relu {
			for ch, v := range xr {
				yr[ch] = max(v*scale[ch]+shift[ch], 0)
			}
			continue
		}
		for ch, v := range xr {
			yr[ch] = v*scale[ch] + shift[ch]
		}
	}
}

// masked is d where a ReLU's output y is positive, else 0, without a
// branch: the mask is unpredictable and Go compiles float selects to
// branches, which mispredict half the time. y >= +0 (max(v, 0) gives +0,
// never -0), so y is inactive exactly when its bits are all zero; b|-b has
// its sign bit set for any other b, and shifting it down makes the mask.
func masked(d, y float32) float32 {
	b := int32(math.Float32bits(y))
	return math.Float32frombits(math.Float32bits(d) & uint32((b|-b)>>31))
}

// Backward of training-mode normalisation: dgamma += sum(dy*xhat), dbeta
// += sum(dy) over this rank's batch, and dx = gamma*invstd*(dy -
// sum(dy)/M - xhat*sum(dy*xhat)/M) with sums and M over the global batch.
// With a fused ReLU, dy is first masked by the output y.
func (l *BatchNorm2d) Backward(dx, dy, x, y []float32, n int) {
	C := l.c
	rows := n * l.hw
	s := l.sums[:2*C]
	clear(s)
	for r := range rows {
		xr, dr, yr := x[r*C:(r+1)*C], dy[r*C:(r+1)*C], y[r*C:(r+1)*C]
		for ch, d := range dr {
			if l.relu {
				d = masked(d, yr[ch])
			}
			xhat := (float64(xr[ch]) - l.bmean[ch]) * l.invstd[ch]
			s[ch] += float64(d)
			s[C+ch] += float64(d) * xhat
		}
	}
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
	// dx = a*dy + b*x + c per channel, with xhat expanded.
	a, bx, c0 := l.ka, l.kb, l.kc
	for ch := range C {
		k := float64(g[ch]) * l.invstd[ch]
		mdy, mdyx := s[ch]/m, s[C+ch]/m
		// k*(dy - mdy - (x-mean)*invstd*mdyx)
		a[ch] = float32(k)
		bx[ch] = float32(-k * l.invstd[ch] * mdyx)
		c0[ch] = float32(-k*mdy + k*l.invstd[ch]*mdyx*l.bmean[ch])
	}
	for r := range rows {
		xr, dr, yr, out := x[r*C:(r+1)*C], dy[r*C:(r+1)*C], y[r*C:(r+1)*C], dx[r*C:(r+1)*C]
		if l.relu {
			for ch, d := range dr {
				out[ch] = a[ch]*masked(d, yr[ch]) + bx[ch]*xr[ch] + c0[ch]
			}
			continue
		}
		for ch, d := range dr {
			out[ch] = a[ch]*d + bx[ch]*xr[ch] + c0[ch]
		}
	}
}
