package model

// #include "kernels.h"
import "C"

// MaxPool2d is torch.nn.MaxPool2d(k, stride, padding) on NHWC
// activations: padding counts as -inf (never the maximum), and of equal
// values the first in the window (row by row) wins, as in PyTorch.
// Forward remembers where each maximum came from.
type MaxPool2d struct {
	c, h, w, k, oh, ow int
	stride, pad        int
	arg                []int32 // per output value: its input offset within the sample
}

// NewMaxPool2d pools (h, w, c) by k x k windows, stride k, no padding.
func NewMaxPool2d(c, h, w, k int) *MaxPool2d { return NewMaxPool2dStride(c, h, w, k, k, 0) }

// NewMaxPool2dStride pools (h, w, c) by k x k windows at stride with pad
// rows and columns of padding on each side (torchvision ResNets' stem:
// k 3, stride 2, pad 1).
func NewMaxPool2dStride(c, h, w, k, stride, pad int) *MaxPool2d {
	return &MaxPool2d{c: c, h: h, w: w, k: k, stride: stride, pad: pad, oh: (h+2*pad-k)/stride + 1, ow: (w+2*pad-k)/stride + 1}
}

func (l *MaxPool2d) InSize() int  { return l.h * l.w * l.c }
func (l *MaxPool2d) OutSize() int { return l.oh * l.ow * l.c }

// Forward: y (n, oh, ow, c) holds each window's maximum.
func (l *MaxPool2d) Forward(y, x []float32, n int) {
	if len(l.arg) < n*l.OutSize() {
		l.arg = make([]int32, n*l.OutSize())
	}
	C := l.c
	for b := range n {
		img := x[b*l.InSize() : (b+1)*l.InSize()]
		out := y[b*l.OutSize() : (b+1)*l.OutSize()]
		arg := l.arg[b*l.OutSize() : (b+1)*l.OutSize()]
		for oh := range l.oh {
			for ow := range l.ow {
				o := (oh*l.ow + ow) * C
				first := true
				for i := range l.k {
					r := oh*l.stride - l.pad + i
					if r < 0 || r >= l.h {
						continue
					}
					for j := range l.k {
						q := ow*l.stride - l.pad + j
						if q < 0 || q >= l.w {
							continue
						}
						in := (r*l.w + q) * C
						for ch := range C {
							if v := img[in+ch]; first || v > out[o+ch] {
								out[o+ch], arg[o+ch] = v, int32(in+ch)
							}
						}
						first = false
					}
				}
			}
		}
	}
}

// Backward routes each dy to the input that was the maximum.
func (l *MaxPool2d) Backward(dx, dy, _, _ []float32, n int) {
	if dx == nil {
		return
	}
	clear(dx[:n*l.InSize()])
	for b := range n {
		d := dx[b*l.InSize() : (b+1)*l.InSize()]
		for i, g := range dy[b*l.OutSize() : (b+1)*l.OutSize()] {
			d[l.arg[b*l.OutSize()+i]] += g
		}
	}
}

// AvgPool2d is torch.nn.AvgPool2d(k) (stride k, no padding) on NHWC
// activations; GlobalAvgPool is the special case k = h = w, giving (n, c)
// like torch.nn.AdaptiveAvgPool2d(1) followed by flatten.
type AvgPool2d struct{ c, h, w, kh, kw, oh, ow int }

// NewAvgPool2d averages (h, w, c) over k x k windows.
func NewAvgPool2d(c, h, w, k int) *AvgPool2d {
	return &AvgPool2d{c: c, h: h, w: w, kh: k, kw: k, oh: h / k, ow: w / k}
}

// NewGlobalAvgPool averages each channel of (h, w, c) to one value.
func NewGlobalAvgPool(c, h, w int) *AvgPool2d {
	return &AvgPool2d{c: c, h: h, w: w, kh: h, kw: w, oh: 1, ow: 1}
}

func (l *AvgPool2d) InSize() int  { return l.h * l.w * l.c }
func (l *AvgPool2d) OutSize() int { return l.oh * l.ow * l.c }

// Forward: each output is the mean of its window (kernels.c, the
// images across the rank's threads).
func (l *AvgPool2d) Forward(y, x []float32, n int) {
	need(n*l.OutSize(), y)
	need(n*l.InSize(), x)
	if n == 0 {
		return
	}
	l.run(0, y, x, n)
}

// Backward spreads each dy evenly over its window.
func (l *AvgPool2d) Backward(dx, dy, _, _ []float32, n int) {
	if dx == nil || n == 0 {
		return
	}
	need(n*l.InSize(), dx)
	need(n*l.OutSize(), dy)
	l.run(1, dx, dy, n)
}

func (l *AvgPool2d) run(grad int, y, x []float32, n int) {
	z := func(v int) C.size_t { return C.size_t(v) }
	C.k_avgpool_par(C.int(grad), f32(y), f32(x), z(n), z(l.h), z(l.w), z(l.c), z(l.kh), z(l.kw), z(l.oh), z(l.ow),
		C.float(1/float32(l.kh*l.kw)))
}
