package model

import (
	"math"
	"math/rand/v2"
)

// Linear is torch.nn.Linear: y = x W^T + b, with W (out, in) and b (out).
type Linear struct {
	p       *Params
	W, B    Tensor
	in, out int
}

// NewLinear registers prefix.weight (out, in) and prefix.bias (out) in p.
func NewLinear(p *Params, prefix string, in, out int) *Linear {
	return &Linear{
		p:  p,
		W:  p.Add(prefix+".weight", out, in),
		B:  p.Add(prefix+".bias", out),
		in: in, out: out,
	}
}

func (l *Linear) InSize() int  { return l.in }
func (l *Linear) OutSize() int { return l.out }

// init draws W and b uniformly from +-1/sqrt(in), PyTorch's default
// (kaiming_uniform_ with a = sqrt(5) for W, the same bound for b).
func (l *Linear) init(rng *rand.Rand) {
	bound := 1 / math.Sqrt(float64(l.in))
	for _, t := range []Tensor{l.W, l.B} {
		l.p.InitBuf(t, l.p.Data, func(v []float32) {
			for i := range v {
				v[i] = float32((2*rng.Float64() - 1) * bound)
			}
		})
	}
}

// Forward: x is (n, in), y is (n, out).
func (l *Linear) Forward(y, x []float32, n int) {
	w, b := l.W.Of(l.p.Data), l.B.Of(l.p.Data)
	for i := range n {
		copy(y[i*l.out:(i+1)*l.out], b)
	}
	sgemm(false, true, n, l.out, l.in, 1, x, l.in, w, l.in, 1, y, l.out)
}

// Backward: dW += dy^T x, db += column sums of dy, dx = dy W.
func (l *Linear) Backward(dx, dy, x, _ []float32, n int) {
	w := l.W.Of(l.p.Data)
	dw, db := l.W.Of(l.p.Grad), l.B.Of(l.p.Grad)
	sgemm(true, false, l.out, l.in, n, 1, dy, l.out, x, l.in, 1, dw, l.in)
	for i := range n {
		row := dy[i*l.out : (i+1)*l.out]
		for j, v := range row {
			db[j] += v
		}
	}
	if dx != nil {
		sgemm(false, false, n, l.in, l.out, 1, dy, l.out, w, l.in, 0, dx, l.in)
	}
}

// ReLU is torch.nn.ReLU: y = max(x, 0), size preserved.
type ReLU struct{ size int }

// NewReLU returns a ReLU over size values per sample.
func NewReLU(size int) *ReLU { return &ReLU{size} }

func (r *ReLU) InSize() int  { return r.size }
func (r *ReLU) OutSize() int { return r.size }

// Forward: x and y are (n, size).
func (r *ReLU) Forward(y, x []float32, n int) {
	for i, v := range x[:n*r.size] {
		y[i] = max(v, 0)
	}
}

// Backward passes dy where the output was positive.
func (r *ReLU) Backward(dx, dy, _, y []float32, n int) {
	if dx == nil {
		return
	}
	reluMask(dx, dy, y, n*r.size)
}

func (l *Linear) flops() (fwd, dw, dx int64) {
	f := 2 * int64(l.in) * int64(l.out)
	return f, f, f
}
