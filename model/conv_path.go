package model

/*
#include "kernels.h"
*/
import "C"

// convPath is one way to compute a convolution's three products, chosen
// per layer from its shape, the CPU and --conv (Conv2D.path): each adds
// a file of kernels (par.c's passes over conv_*.c and winograd.c), not a
// branch in Forward and Backward.
type convPath interface {
	// forward sets y (n, outH, outW, outC) from x, or adds to it when
	// beta is 1 (the bias copied in first); n > 0.
	forward(c *Conv2D, y, x []float32, n int, beta float32)
	// weightGrad adds the weight gradient to dw (PyTorch's layout).
	weightGrad(c *Conv2D, dw, dy, x []float32, n int)
	// inputGrad sets dx (n, inH, inW, inC).
	inputGrad(c *Conv2D, dx, dy []float32, n int)
}

// inputGradAdder is a convPath that can add its input gradient to dx
// instead of setting it. A residual block whose shortcut is the identity
// then leaves the shortcut's gradient in dx and has the convolution add
// its own on top as it writes (BasicBlock.Backward): a write and a read
// of the block's input gradient fewer, and no pass of its own for the
// sum. Float addition commutes, so the bits are the separate add's.
type inputGradAdder interface {
	inputGradAdd(c *Conv2D, dx, dy []float32, n int)
}

// path is the layer's convPath: a stem directly (few), a strided layer
// directly (strided), a 3x3 stride-1 layer through Winograd's F(m x m)
// (wino), anything else through im2col and SGEMM.
func (c *Conv2D) path() convPath {
	switch {
	case c.few():
		return fewPath{}
	case c.strided():
		return directPath{}
	case c.wino() != 0:
		return winoPath{c.wino()}
	}
	return im2colPath{}
}

// im2colPath: im2col and one SGEMM per part of the batch (par.c's
// k_conv_*), a 1x1 stride-1 unpadded layer one SGEMM on x itself.
type im2colPath struct{}

func (im2colPath) forward(c *Conv2D, y, x []float32, n int, beta float32) {
	c.permute()
	C.k_conv_forward(c.shape(n), f32(y), f32(x), f32(c.wt), C.float(beta))
}

func (im2colPath) weightGrad(c *Conv2D, dw, dy, x []float32, n int) {
	C.k_conv_dw(c.shape(n), f32(dw), f32(dy), f32(x))
}

// inputGrad reads the forward's permuted weight: for a stride-1 layer as
// a forward convolution with the flipped kernel (flip), else as the
// product dy wt scattered back by col2im.
func (im2colPath) inputGrad(c *Conv2D, dx, dy []float32, n int) {
	var wflip *C.float
	if c.stride == 1 && !c.direct() {
		if c.wflip == nil { // made on first use: Winograd layers never need it
			c.wflip = make([]float32, len(c.wt))
		}
		c.flip()
		wflip = f32(c.wflip)
	}
	C.k_conv_dx(c.shape(n), f32(dx), f32(dy), f32(c.wt), wflip)
}

// winoPath: Winograd's F(m x m, 3x3) (winograd.c). The forward
// transforms W and sets the permuted copy wt that the input gradient
// reads.
type winoPath struct{ m int }

func (p winoPath) forward(c *Conv2D, y, x []float32, n int, beta float32) {
	p.forwardPre(c, y, x, n, beta, nil)
}

func (p winoPath) weightGrad(c *Conv2D, dw, dy, x []float32, n int) {
	p.weightGradPre(c, dw, dy, x, n, nil)
}

// forwardPre is forward with pre's BatchNorm and ReLU applied to x (none
// when nil) by the input transform (bnconv.go).
func (p winoPath) forwardPre(c *Conv2D, y, x []float32, n int, beta float32, pre *normReLU) {
	m, s, b := pre.ptrs()
	var st *C.double
	bn := c.statsTo
	if bn != nil {
		bn.given = nil
	}
	if bn != nil && bn.mode.Training && statsInConv {
		sums := bn.sums[:2*bn.c]
		clear(sums)
		st = f64(sums)
	}
	if C.k_wino_forward(c.shape(n), f32(y), f32(x), f32(c.W.Of(c.p.Data)), f32(c.wt), 0, C.float(beta), C.int(p.m), m, s, b, st) != 0 {
		bn.given = y[:n*c.OutSize()]
		statsMade++
	}
}

// statsRows is the rows of a part of the BatchNorm statistics of this
// layer's output: a Winograd forward's parts, which make them as they go
// (k_wino_forward), and which the BatchNorm takes when it makes them
// itself (a pass run wide, statsInConv off), so that both give the same
// bits (TestBNStatsInConv); 0, BatchNorm's own cut, for any other layer
// or none.
// In ResNet-20 at batch 64, 2 threads, `train bench step --passes`: the
// statistics' own passes 1.15 -> 0.28 ms a step (the stem's and the
// projection shortcuts' are left); `scripts/bench/ab-step.sh` at 2
// threads 1.017 (7 of 10 rounds faster), at one 1.001 (7 of 10).
func (c *Conv2D) statsRows(n int) int {
	if c == nil || n == 0 {
		return 0
	}
	p, ok := c.path().(winoPath)
	if !ok {
		return 0
	}
	return int(C.k_wino_fwd_part(c.shape(n), C.int(p.m))) * c.outH * c.outW
}

// statsMade counts the forwards that made their BatchNorm's statistics
// (a test's check that its shapes take the path).
var statsMade int

// statsInConv, when false, leaves every BatchNorm's statistics to its
// own pass (TestBNStatsInConv's reference).
var statsInConv = true

// weightGradPre is weightGrad whose forward was forwardPre with pre.
func (p winoPath) weightGradPre(c *Conv2D, dw, dy, x []float32, n int, pre *normReLU) {
	m, s, b := pre.ptrs()
	C.k_wino_dw(c.shape(n), f32(dw), f32(c.dwt), f32(dy), f32(x), C.int(p.m), m, s, b)
}

// inputGrad: dx is the forward convolution of dy with the kernel rotated
// and the channels swapped, padding 1 again.
func (p winoPath) inputGrad(c *Conv2D, dx, dy []float32, n int) { p.inputGradBeta(c, dx, dy, n, 0) }

// inputGradAdd: the same, added to dx by the output transform.
func (p winoPath) inputGradAdd(c *Conv2D, dx, dy []float32, n int) { p.inputGradBeta(c, dx, dy, n, 1) }

func (p winoPath) inputGradBeta(c *Conv2D, dx, dy []float32, n int, beta float32) {
	t := *c.shape(n)
	t.c, t.o = t.o, t.c
	C.k_wino_forward(&t, f32(dx), f32(dy), nil, f32(c.wt), 1, C.float(beta), C.int(p.m), nil, nil, nil, nil)
}

// fewPath: a stem of 1 to 3 channels in, forward and weight gradient
// directly (conv_few.c); its input gradient, when asked for, is
// Winograd's (im2col's on an image under 4x4), from the copy wt that the
// forward permutes.
type fewPath struct{}

func (fewPath) forward(c *Conv2D, y, x []float32, n int, beta float32) {
	c.permute()
	C.k_few_forward(c.shape(n), f32(y), f32(x), f32(c.wt), C.float(beta))
}

func (fewPath) weightGrad(c *Conv2D, dw, dy, x []float32, n int) {
	C.k_few_dw(c.shape(n), f32(dw), f32(dy), f32(x))
}

func (fewPath) inputGrad(c *Conv2D, dx, dy []float32, n int) {
	if m := c.wino(); m != 0 {
		winoPath{m}.inputGrad(c, dx, dy, n)
		return
	}
	im2colPath{}.inputGrad(c, dx, dy, n)
}
