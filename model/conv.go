package model

/*
#include "kernels.h"
*/
import "C"

import (
	"math"
	"math/rand/v2"
)

// Conv2D is torch.nn.Conv2d (square kernel, equal stride and padding on
// both axes, no groups or dilation) on NHWC activations: x is (n, inH,
// inW, inC), y is (n, outH, outW, outC). The weight keeps PyTorch's layout
// (outC, inC, k, k) so checkpoints load into PyTorch.
//
// A layer's products take one of the paths of conv_path.go, chosen by its
// shape, the CPU and --conv. The general one is im2col + GEMM: each row
// of the im2col matrix is one output pixel's receptive field ordered (ki,
// kj, c), so it is built from contiguous copies of inC values out of the
// NHWC input, and the GEMM writes y in NHWC directly. The weight is
// permuted to (outC, k, k, inC) for it on each call (it is small); its
// gradient comes back the same way. A 1x1 stride-1 unpadded convolution
// uses x itself as the im2col matrix. Under --conv winograd, 3x3
// stride-1 layers run as Winograd's minimal filtering (winograd.c),
// stems directly (conv_few.c), and strided layers directly on AVX-512
// (conv_direct.c).
type Conv2D struct {
	p                *Params
	W, B             Tensor
	bias             bool
	inC, inH, inW    int
	outC, outH, outW int
	k, stride, pad   int
	wt, dwt          []float32 // weight, and Winograd's weight gradient before par.c adds it to W's, as (outC, k, k, inC)
	wflip            []float32 // stride 1 im2col: the flipped kernel as (k, k, outC, inC), for dx
	// statsTo, when not nil, normalises this layer's output in training:
	// a Winograd forward makes its statistics as it goes (winoPath).
	statsTo *BatchNorm2d
}

// winograd turns Winograd's minimal filtering on for the 3x3 stride-1
// padding-1 convolutions (winograd.c): UseWinograd, --conv winograd.
var winograd = false

// UseWinograd makes this process's 3x3 stride-1 padding-1 convolutions
// of 4x4 and up run as Winograd's F(4x4, 3x3) or F(2x2, 3x3) (wino), or
// all as im2col and one SGEMM (off, the default for library users; the
// CLI's --conv defaults to winograd). Its rounding differs from im2col's
// (winograd_test.go).
func UseWinograd(on bool) { winograd = on }

// wino is the output tile m of the Winograd F(m x m, 3x3) this
// convolution runs as, 0 for im2col: on images of 4x4 and up, F(4x4) up
// to 128 channels in and out, F(2x2) above.
//
// F(4x4) (36 products per 16 outputs, against 144) measured faster than
// F(2x2) (16 per 4) up to 128 channels (BenchmarkConv3x3, one thread:
// 1.6x F(2x2) at 28x28x16 and at 7x7x64 on 64 images, 2.6x at 56x56x64
// on 8), level at 14x14x256 and slower at 7x7x512 on 8 images, where
// transforming 512 x 512 kernels to 36 points each costs more than the
// products it saves. Its rounding grows with the channels summed
// (winograd_test.go: 1.6e-6 of the largest output at 16, 2e-6 at 64,
// 5.5e-6 at 256; F(2x2) stays under 1e-6 like im2col); with the points
// of winograd.c, TestTorchvisionResNet's ResNet-50 meets torchvision's
// bounds with F(4x4) in every layer (lowest gradient cosine 0.99993),
// where Lavin's points had missed them (0.9977) with F(4x4) at 64
// channels alone. The choice depends on the layer's shape only, never on
// the batch, so that ranks holding different shares of a batch compute
// it the same way.
func (c *Conv2D) wino() int {
	if !winograd || c.k != 3 || c.stride != 1 || c.pad != 1 {
		return 0
	}
	if winoTile != 0 {
		return winoTile
	}
	switch {
	case c.inH < 4 || c.inW < 4:
		return 0
	case c.inC <= 128 && c.outC <= 128:
		return 4
	}
	return 2
}

// few reports whether this convolution runs directly (conv_few.c): a
// 3x3 stride-1 padding-1 layer of 1 to 3 input channels and a multiple
// of 16 out, a stem, where Winograd's products would have 1 to 3 as
// their inner dimension. Under --conv winograd only (the tests that set
// winoTile hold such layers to Winograd's path); its input gradient
// stays Winograd's.
func (c *Conv2D) few() bool {
	return winograd && winoTile == 0 && c.k == 3 && c.stride == 1 && c.pad == 1 && c.inC <= 3 && c.outC%16 == 0
}

// winoTile, when not 0, is the m every Winograd convolution uses (the
// tests and benchmarks set it).
var winoTile = 0

// winoProducts is the element-wise products per channel pair that F(m x
// m)'s tiles take over an h x w image of c channels in and o out, from
// winograd.c's plan: (m+2)^2 a tile, or fewer where a side ends in an
// F(2) tile (k_wino_plan).
func winoProducts(h, w, c, o, m int) int {
	var p C.struct_k_wino_plan
	C.k_wino_plan(&p, C.size_t(h), C.size_t(w), C.size_t(c), C.size_t(o), C.int(m))
	n := 0
	for _, k := range p.c[:p.n] {
		n += int(k.my+2) * int(k.mx+2) * int(k.ny*k.nx)
	}
	return n
}

// NewConv2D registers prefix.weight (outC, inC, k, k) and, with bias,
// prefix.bias (outC).
func NewConv2D(p *Params, prefix string, inC, inH, inW, outC, k, stride, pad int, bias bool) *Conv2D {
	c := &Conv2D{p: p, bias: bias, inC: inC, inH: inH, inW: inW, outC: outC, k: k, stride: stride, pad: pad}
	c.outH = (inH+2*pad-k)/stride + 1
	c.outW = (inW+2*pad-k)/stride + 1
	c.W = p.Add(prefix+".weight", outC, inC, k, k)
	if bias {
		c.B = p.Add(prefix+".bias", outC)
	}
	c.wt = make([]float32, outC*k*k*inC)
	c.dwt = make([]float32, len(c.wt))
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
		c.p.InitBuf(t, c.p.Data, func(v []float32) {
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

// permute copies the PyTorch weight (o, c, i, j) into wt (o, i, j, c)
// (par.c's k_permute_weights).
func (c *Conv2D) permute() {
	C.k_permute_weights(f32(c.wt), f32(c.W.Of(c.p.Data)), 0, C.size_t(c.outC), C.size_t(c.inC), C.size_t(c.k*c.k))
}

// shape is the convolution of n images, for the C passes.
func (c *Conv2D) shape(n int) *C.struct_k_conv_shape {
	z := func(v int) C.size_t { return C.size_t(v) }
	return &C.struct_k_conv_shape{n: z(n), c: z(c.inC), h: z(c.inH), w: z(c.inW), o: z(c.outC), oh: z(c.outH), ow: z(c.outW), k: z(c.k), stride: z(c.stride), pad: z(c.pad)}
}

// Forward: y (n, outH, outW, outC) = conv(x (n, inH, inW, inC)) plus
// the bias, through the layer's path (conv_path.go), across the rank's
// threads (par.c).
func (c *Conv2D) Forward(y, x []float32, n int) { c.forward(y, x, n, nil) }

// forward is Forward; pre, when not nil, is a BatchNorm and ReLU that
// the layer's Winograd path applies to x as it reads it (bnconv.go, which
// asks fusesInput first).
func (c *Conv2D) forward(y, x []float32, n int, pre *normReLU) {
	need(n*c.OutSize(), y)
	need(n*c.InSize(), x)
	beta := float32(0)
	if c.bias {
		b := c.B.Of(c.p.Data)
		for r := range n * c.outH * c.outW {
			copy(y[r*c.outC:(r+1)*c.outC], b)
		}
		beta = 1
	}
	if n == 0 {
		return
	}
	useBLAS()
	if pre != nil {
		c.path().(winoPath).forwardPre(c, y, x, n, beta, pre)
		return
	}
	c.path().forward(c, y, x, n, beta)
}

// fusesInput reports whether forward can take a pre: a Winograd layer
// whose input transform takes the AVX-512 row paths (k_wino_fuses).
func (c *Conv2D) fusesInput() bool {
	_, ok := c.path().(winoPath)
	return ok && C.k_wino_fuses(C.size_t(c.inC)) != 0
}

// Backward: dW += the weight gradient (each part of the batch's sums,
// added in an order the part count fixes: par.c's sum_first), db +=
// column sums of dy, and unless dx is nil, dx = the input gradient.
func (c *Conv2D) Backward(dx, dy, x, _ []float32, n int) { c.backward(dx, dy, x, n, nil) }

// addsInputGrad reports whether backwardAdd is open to this layer: its
// path can add the input gradient to dx (inputGradAdder).
func (c *Conv2D) addsInputGrad() bool {
	_, ok := c.path().(inputGradAdder)
	return ok
}

// backwardAdd is Backward with the input gradient added to dx's values
// (addsInputGrad must hold).
func (c *Conv2D) backwardAdd(dx, dy, x []float32, n int) {
	c.backward(nil, dy, x, n, nil)
	if n == 0 {
		return
	}
	need(n*c.InSize(), dx)
	c.path().(inputGradAdder).inputGradAdd(c, dx, dy, n)
}

// backward is Backward after a forward with pre.
func (c *Conv2D) backward(dx, dy, x []float32, n int, pre *normReLU) {
	rows := n * c.outH * c.outW
	need(n*c.OutSize(), dy)
	need(n*c.InSize(), x)
	if n == 0 {
		return
	}
	useBLAS()
	p := c.path()
	if pre != nil {
		p.(winoPath).weightGradPre(c, c.W.Of(c.p.Grad), dy, x, n, pre)
	} else {
		p.weightGrad(c, c.W.Of(c.p.Grad), dy, x, n)
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
	need(n*c.InSize(), dx)
	p.inputGrad(c, dx, dy, n)
}

// flip sets wflip for a stride-1 convolution's dx, the forward
// convolution of dy with the flipped kernel and padding k-1-pad:
//
//	dx[p, c] = sum over i, j, o of dy[p + pad - (i, j), o] W[o, c, i, j]
//
// that is, dx = im2col(dy) . wflip with wflip[(k-1-i, k-1-j, o), c] =
// W[o, c, i, j]. Against the GEMM into an im2col-shaped dcols and the
// col2im scatter-add after it, this gathers instead of scattering (no
// clearing of dx), and its GEMM's inner dimension is k*k*outC instead of
// outC.
func (c *Conv2D) flip() {
	k, O, I := c.k, c.outC, c.inC
	w := c.W.Of(c.p.Data)
	for o := range O {
		for ch := range I {
			for i := range k {
				for j := range k {
					c.wflip[((k-1-i)*k+(k-1-j))*O*I+o*I+ch] = w[((o*I+ch)*k+i)*k+j]
				}
			}
		}
	}
}
