package model

// MaxPool2d is torch.nn.MaxPool2d(k) (stride k, no padding) on NHWC
// activations. Forward remembers where each maximum came from.
type MaxPool2d struct {
	c, h, w, k, oh, ow int
	arg                []int32 // per output value: its input offset within the sample
}

// NewMaxPool2d pools (h, w, c) by k x k windows.
func NewMaxPool2d(c, h, w, k int) *MaxPool2d {
	return &MaxPool2d{c: c, h: h, w: w, k: k, oh: h / k, ow: w / k}
}

func (l *MaxPool2d) InSize() int  { return l.h * l.w * l.c }
func (l *MaxPool2d) OutSize() int { return l.oh * l.ow * l.c }

// Forward: y (n, h/k, w/k, c) holds each window's maximum.
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
				first := (oh*l.k*l.w + ow*l.k) * C
				for ch := range C {
					out[o+ch], arg[o+ch] = img[first+ch], int32(first+ch)
				}
				for i := range l.k {
					for j := range l.k {
						in := ((oh*l.k+i)*l.w + ow*l.k + j) * C
						for ch := range C {
							if v := img[in+ch]; v > out[o+ch] {
								out[o+ch], arg[o+ch] = v, int32(in+ch)
							}
						}
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

// Forward: each output is the mean of its window.
func (l *AvgPool2d) Forward(y, x []float32, n int) {
	C := l.c
	inv := 1 / float32(l.kh*l.kw)
	clear(y[:n*l.OutSize()])
	for b := range n {
		img := x[b*l.InSize() : (b+1)*l.InSize()]
		out := y[b*l.OutSize() : (b+1)*l.OutSize()]
		for ih := range l.oh * l.kh {
			for iw := range l.ow * l.kw {
				o := ((ih/l.kh)*l.ow + iw/l.kw) * C
				in := (ih*l.w + iw) * C
				for ch := range C {
					out[o+ch] += img[in+ch]
				}
			}
		}
		for i := range out {
			out[i] *= inv
		}
	}
}

// Backward spreads each dy evenly over its window.
func (l *AvgPool2d) Backward(dx, dy, _, _ []float32, n int) {
	if dx == nil {
		return
	}
	C := l.c
	inv := 1 / float32(l.kh*l.kw)
	clear(dx[:n*l.InSize()])
	for b := range n {
		d := dx[b*l.InSize() : (b+1)*l.InSize()]
		g := dy[b*l.OutSize() : (b+1)*l.OutSize()]
		for ih := range l.oh * l.kh {
			for iw := range l.ow * l.kw {
				o := ((ih/l.kh)*l.ow + iw/l.kw) * C
				in := (ih*l.w + iw) * C
				for ch := range C {
					d[in+ch] = g[o+ch] * inv
				}
			}
		}
	}
}
