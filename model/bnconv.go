package model

/*
#include "kernels.h"
*/
import "C"

// normReLU is a BatchNorm's apply and its ReLU as per-channel terms:
// max((x - mean)*scale + beta, 0), k_affine's values (struct k_pre).
type normReLU struct{ mean, scale, beta []float32 }

// ptrs is a's terms for the C passes, nil for none.
func (a *normReLU) ptrs() (mean, scale, beta *C.float) {
	if a == nil {
		return nil, nil, nil
	}
	return f32(a.mean), f32(a.scale), f32(a.beta)
}

// bnConv is a BatchNorm with its ReLU and the convolution that reads its
// output (a BasicBlock's bn1 and conv2). Where the convolution runs
// Winograd's AVX-512 row transforms (Conv2D.fusesInput), the normalised
// activation is never written: the convolution reads the BatchNorm's
// input and normalises each value as its input transform loads it, in
// the forward and again in the weight gradient. That saves k_affine's
// pass (read one activation, write another), the weight gradient's read
// of the written one, and its memory: ResNet-20's BatchNorm apply was
// 5.1 of 228 ms in a one-thread step (`train bench step --passes`). The
// values are k_affine's, the same expression compiled to the same FMA,
// so the results are the unfused path's to the bit (TestBNConvFused).
// Elsewhere (im2col, AVX2, the baseline: their clones would lengthen a
// cold build of winograd.c for little) it runs the two layers one after
// the other.
type bnConv struct {
	bn    *BatchNorm2d
	conv  *Conv2D
	fused bool      // the last Forward's choice, which its Backward follows
	pre   normReLU  // the last fused Forward's terms
	out   []float32 // unfused: bn's output, the convolution's input
}

// fuseBN, when false, runs every bnConv unfused (TestBNConvFused's
// reference).
var fuseBN = true

// Forward sets y = conv(relu(bn(x))) for n samples.
func (f *bnConv) Forward(y, x []float32, n int) {
	f.fused = fuseBN && f.bn.relu && f.conv.fusesInput()
	if !f.fused {
		if o := n * f.bn.OutSize(); len(f.out) < o {
			f.out = make([]float32, o)
		}
		f.bn.Forward(f.out, x, n)
		f.conv.Forward(y, f.out, n)
		return
	}
	mean, scale := f.bn.norm(x, n) // a collective under synchronised BatchNorm: every rank, even with n = 0
	f.pre = normReLU{mean, scale, f.bn.B.Of(f.bn.p.Data)}
	f.conv.forward(y, x, n, &f.pre)
}

// convBackward is the convolution's Backward after Forward: its weight
// gradient, and dx, the gradient at the BatchNorm's output (nil: none).
// The BatchNorm's own Backward reads x, as before.
func (f *bnConv) convBackward(dx, dy, x []float32, n int) {
	if !f.fused {
		f.conv.Backward(dx, dy, f.out, nil, n)
		return
	}
	f.conv.backward(dx, dy, x, n, &f.pre)
}

// heldBytes: bn's output where a forward ran unfused.
func (f *bnConv) heldBytes() int { return floats(f.out) }
