package model

import (
	"math"
	"math/rand/v2"
)

// Conv2D is torch.nn.Conv2d (square kernel, equal stride and padding on
// both axes, no groups or dilation) on NHWC activations: x is (n, inH,
// inW, inC), y is (n, outH, outW, outC). The weight keeps PyTorch's layout
// (outC, inC, k, k) so checkpoints load into PyTorch.
//
// It is im2col + GEMM. Each row of the im2col matrix is one output pixel's
// receptive field ordered (ki, kj, c), so it is built from contiguous
// copies of inC values out of the NHWC input, and the GEMM writes y in
// NHWC directly. The weight is permuted to (outC, k, k, inC) for it on
// each call (it is small); its gradient comes back the same way. A 1x1
// stride-1 unpadded convolution uses x itself as the im2col matrix.
type Conv2D struct {
	p                *Params
	W, B             Tensor
	bias             bool
	inC, inH, inW    int
	outC, outH, outW int
	k, stride, pad   int
	wt, dwt          []float32 // weight and its gradient as (outC, k, k, inC)
	wflip            []float32 // stride 1: the flipped kernel as (k, k, outC, inC), for dx
	scr              *scratch
}

// NewConv2D registers prefix.weight (outC, inC, k, k) and, with bias,
// prefix.bias (outC).
func NewConv2D(p *Params, scr *scratch, prefix string, inC, inH, inW, outC, k, stride, pad int, bias bool) *Conv2D {
	c := &Conv2D{p: p, bias: bias, inC: inC, inH: inH, inW: inW, outC: outC, k: k, stride: stride, pad: pad, scr: scr}
	c.outH = (inH+2*pad-k)/stride + 1
	c.outW = (inW+2*pad-k)/stride + 1
	c.W = p.Add(prefix+".weight", outC, inC, k, k)
	if bias {
		c.B = p.Add(prefix+".bias", outC)
	}
	c.wt = make([]float32, outC*k*k*inC)
	c.dwt = make([]float32, len(c.wt))
	if stride == 1 && !c.direct() {
		c.wflip = make([]float32, len(c.wt))
	}
	return c
}

func (c *Conv2D) InSize() int  { return c.inH * c.inW * c.inC }
func (c *Conv2D) OutSize() int { return c.outH * c.outW * c.outC }

// kdim is the length of an im2col row.
func (c *Conv2D) kdim() int { return c.k * c.k * c.inC }

func (c *Conv2D) direct() bool { return c.k == 1 && c.stride == 1 && c.pad == 0 }

// init is PyTorch's default: weight and bias uniform in +-1/sqrt(fan_in).
func (c *Conv2D) init(rng *rand.Rand) {
	bound := 1 / math.Sqrt(float64(c.kdim()))
	ts := []Tensor{c.W}
	if c.bias {
		ts = append(ts, c.B)
	}
	for _, t := range ts {
		c.p.initBuf(t, c.p.Data, func(v []float32) {
			for i := range v {
				v[i] = float32((2*rng.Float64() - 1) * bound)
			}
		})
	}
}

func (c *Conv2D) flops() (fwd, dw, dx int64) {
	f := 2 * int64(c.outH*c.outW) * int64(c.outC) * int64(c.kdim())
	return f, f, f
}

// permute copies the PyTorch weight (o, c, i, j) into wt (o, i, j, c).
func (c *Conv2D) permute() {
	w := c.W.Of(c.p.Data)
	kk := c.k * c.k
	for o := range c.outC {
		src := w[o*c.inC*kk : (o+1)*c.inC*kk]
		dst := c.wt[o*kk*c.inC : (o+1)*kk*c.inC]
		for ch := range c.inC {
			for ij := range kk {
				dst[ij*c.inC+ch] = src[ch*kk+ij]
			}
		}
	}
}

// im2col fills cols (n*outH*outW, kdim) from x.
func (c *Conv2D) im2col(cols, x []float32, n int) {
	im2col(cols, x, n, c.inC, c.inH, c.inW, c.k, c.stride, c.pad, c.outH, c.outW)
}

// col2im adds dcols (n*outH*outW, kdim) into dx, the inverse scatter,
// a kernel row at a time where it lies inside the image.
func (c *Conv2D) col2im(dx, dcols []float32, n int) {
	K, C, k := c.kdim(), c.inC, c.k
	kc := k * C
	row := 0
	for b := range n {
		img := dx[b*c.InSize() : (b+1)*c.InSize()]
		for oh := range c.outH {
			for ow := range c.outW {
				r := dcols[row*K : (row+1)*K]
				iw0 := ow*c.stride - c.pad
				inside := iw0 >= 0 && iw0+k <= c.inW
				for i := range k {
					ih := oh*c.stride - c.pad + i
					if ih < 0 || ih >= c.inH {
						continue
					}
					s := r[i*kc : (i+1)*kc]
					if inside {
						d := img[(ih*c.inW+iw0)*C : (ih*c.inW+iw0+k)*C]
						for q, v := range s {
							d[q] += v
						}
						continue
					}
					for j := range k {
						iw := iw0 + j
						if iw < 0 || iw >= c.inW {
							continue
						}
						d := img[(ih*c.inW+iw)*C : (ih*c.inW+iw+1)*C]
						for ch, v := range s[j*C : (j+1)*C] {
							d[ch] += v
						}
					}
				}
				row++
			}
		}
	}
}

// chunkBytes bounds the im2col matrix of one GEMM: the batch is cut into
// chunks of images whose matrix fits the core's L2 cache, so the GEMM
// reads back what im2col just wrote instead of a matrix of tens of MB
// streamed through DRAM twice. Measured on ResNet-20 (see BENCHMARKS.md).
var chunkBytes = 1 << 20

// chunk is the number of images per im2col chunk, at least one.
func chunk(perImage int) int {
	return max(1, chunkBytes/(4*perImage))
}

// cols builds the im2col matrix of images [b0, b1) of x in the model's
// shared scratch. Backward builds it again rather than keeping one per
// layer: measured, one buffer that stays in cache beats 19 read back from
// DRAM.
func (c *Conv2D) cols(x []float32, b0, b1 int) []float32 {
	if c.direct() {
		return x[b0*c.InSize() : b1*c.InSize()]
	}
	cols := c.scr.get((b1 - b0) * c.outH * c.outW * c.kdim())
	c.im2col(cols, x[b0*c.InSize():b1*c.InSize()], b1-b0)
	return cols
}

// step is the number of images per chunk of this layer's im2col.
func (c *Conv2D) step() int {
	if c.direct() {
		return 1 << 30
	}
	return chunk(c.outH * c.outW * c.kdim())
}

// Forward: y (n, outH, outW, outC) = conv(x (n, inH, inW, inC)).
func (c *Conv2D) Forward(y, x []float32, n int) {
	K, P := c.kdim(), c.outH*c.outW
	c.permute()
	beta := float32(0)
	if c.bias {
		b := c.B.Of(c.p.Data)
		for r := range n * P {
			copy(y[r*c.outC:(r+1)*c.outC], b)
		}
		beta = 1
	}
	for b0 := 0; b0 < n; b0 += c.step() {
		b1 := min(n, b0+c.step())
		cols := c.cols(x, b0, b1)
		sgemm(false, true, (b1-b0)*P, c.outC, K, 1, cols, K, c.wt, K, beta, y[b0*P*c.outC:], c.outC)
	}
}

// Backward: dW += dy^T cols (permuted back), db += column sums of dy, and
// unless dx is nil, dx = col2im(dy W).
func (c *Conv2D) Backward(dx, dy, x, _ []float32, n int) {
	rows, K, P := n*c.outH*c.outW, c.kdim(), c.outH*c.outW
	for b0 := 0; b0 < n; b0 += c.step() {
		b1 := min(n, b0+c.step())
		cols := c.cols(x, b0, b1)
		beta := float32(1)
		if b0 == 0 {
			beta = 0
		}
		sgemm(true, false, c.outC, K, (b1-b0)*P, 1, dy[b0*P*c.outC:], c.outC, cols, K, beta, c.dwt, K)
	}
	dw := c.W.Of(c.p.Grad)
	kk := c.k * c.k
	for o := range c.outC {
		src := c.dwt[o*kk*c.inC : (o+1)*kk*c.inC]
		dst := dw[o*c.inC*kk : (o+1)*c.inC*kk]
		for ch := range c.inC {
			for ij := range kk {
				dst[ch*kk+ij] += src[ij*c.inC+ch]
			}
		}
	}
	if c.bias {
		db := c.B.Of(c.p.Grad)
		for r := range rows {
			for o, v := range dy[r*c.outC : (r+1)*c.outC] {
				db[o] += v
			}
		}
	}
	if dx == nil {
		return
	}
	if c.direct() {
		sgemm(false, false, rows, K, c.outC, 1, dy, c.outC, c.wt, K, 0, dx, K)
		return
	}
	if c.wflip != nil {
		c.backwardStride1(dx, dy, n)
		return
	}
	clear(dx[:n*c.InSize()])
	for b0 := 0; b0 < n; b0 += c.step() {
		b1 := min(n, b0+c.step())
		dcols := c.scr.get((b1 - b0) * P * K)
		sgemm(false, false, (b1-b0)*P, K, c.outC, 1, dy[b0*P*c.outC:], c.outC, c.wt, K, 0, dcols, K)
		c.col2im(dx[b0*c.InSize():b1*c.InSize()], dcols, b1-b0)
	}
}

// backwardStride1 computes dx of a stride-1 convolution as the forward
// convolution of dy with the flipped kernel and padding k-1-pad:
//
//	dx[p, c] = sum over i, j, o of dy[p + pad - (i, j), o] W[o, c, i, j]
//
// that is, dx = im2col(dy) . wflip with wflip[(k-1-i, k-1-j, o), c] =
// W[o, c, i, j]. Against the GEMM into an im2col-shaped dcols and the
// col2im scatter-add after it, this gathers instead of scattering (no
// clearing of dx), and its GEMM's inner dimension is k*k*outC instead of
// outC.
func (c *Conv2D) backwardStride1(dx, dy []float32, n int) {
	k, O, C := c.k, c.outC, c.inC
	w := c.W.Of(c.p.Data)
	for o := range O {
		for ch := range C {
			for i := range k {
				for j := range k {
					c.wflip[((k-1-i)*k+(k-1-j))*O*C+o*C+ch] = w[((o*C+ch)*k+i)*k+j]
				}
			}
		}
	}
	kd, P := k*k*O, c.inH*c.inW
	step := chunk(P * kd)
	for b0 := 0; b0 < n; b0 += step {
		b1 := min(n, b0+step)
		cols := c.scr.get((b1 - b0) * P * kd)
		im2col(cols, dy[b0*c.OutSize():b1*c.OutSize()], b1-b0, O, c.outH, c.outW, k, 1, k-1-c.pad, c.inH, c.inW)
		sgemm(false, false, (b1-b0)*P, C, kd, 1, cols, kd, c.wflip, C, 0, dx[b0*P*C:], C)
	}
}
