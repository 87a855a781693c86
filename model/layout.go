package model

/*
#include "kernels.h"
*/
import "C"

// ToNHWC turns the data's NCHW samples into the NHWC layout the
// convolutions work in (a copy when c = 1).
type ToNHWC struct{ c, h, w int }

// NewToNHWC converts (c, h, w) samples.
func NewToNHWC(c, h, w int) *ToNHWC { return &ToNHWC{c, h, w} }

func (l *ToNHWC) InSize() int  { return l.c * l.h * l.w }
func (l *ToNHWC) OutSize() int { return l.c * l.h * l.w }

// Forward: y[b, i, j, c] = x[b, c, i, j].
func (l *ToNHWC) Forward(y, x []float32, n int) { permuteCHW(y, x, n, l.c, l.h*l.w, true) }

// Backward: the inverse permutation.
func (l *ToNHWC) Backward(dx, dy, _, _ []float32, n int) {
	if dx != nil {
		permuteCHW(dx, dy, n, l.c, l.h*l.w, false)
	}
}

// Flatten is torch.flatten(x, 1) of an NCHW tensor, fed from NHWC
// activations: it writes the values in PyTorch's (c, h, w) order, so the
// Linear layer after it has PyTorch's weight layout.
type Flatten struct{ c, h, w int }

// NewFlatten flattens (h, w, c) activations into c*h*w values.
func NewFlatten(c, h, w int) *Flatten { return &Flatten{c, h, w} }

func (l *Flatten) InSize() int  { return l.c * l.h * l.w }
func (l *Flatten) OutSize() int { return l.c * l.h * l.w }

// Forward: y[b, c*h*w + i*w + j] = x[b, i, j, c].
func (l *Flatten) Forward(y, x []float32, n int) { permuteCHW(y, x, n, l.c, l.h*l.w, false) }

// Backward: the inverse permutation.
func (l *Flatten) Backward(dx, dy, _, _ []float32, n int) {
	if dx != nil {
		permuteCHW(dx, dy, n, l.c, l.h*l.w, true)
	}
}

// permuteCHW moves n samples between (c, hw) and (hw, c) order: toHWC
// reads CHW and writes HWC, otherwise the reverse.
func permuteCHW(dst, src []float32, n, c, hw int, toHWC bool) {
	// Across the threads, sample by sample (par.c: k_permute_chw_par):
	// the input's permutation was serial work ahead of every thread.
	size := c * hw
	if c == 1 {
		copyPar(dst[:n*size], src[:n*size])
		return
	}
	need(n*size, dst, src)
	if n > 0 {
		C.k_permute_chw_par(f32(dst), f32(src), C.size_t(n), C.size_t(c), C.size_t(hw), cbool(toHWC))
	}
}
