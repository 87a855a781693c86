package data

/*
#cgo CFLAGS: -O3
#include "resize.h"
*/
import "C"

import "unsafe"

// Resizing as torchvision does it on PIL images: Pillow's bilinear
// resample (Image.resize(size, Image.BILINEAR), the default of
// torchvision's Resize and RandomResizedCrop), reproduced to the bit. Its
// "bilinear" is a triangle filter widened by the scale when shrinking (an
// antialiasing filter, not four-tap interpolation), with coefficients in
// fixed point (22 fractional bits) and the horizontal pass rounded to
// 8 bits before the vertical one. TestPILResize checks every byte against
// Pillow.

// pilBits is Pillow's PRECISION_BITS for 8-bit images: 32 - 8 - 2.
const pilBits = 22

// pilCoeffs is, for each of out output positions over in input ones, the
// first input it reads, how many, and their fixed-point weights (ksize a
// position). The weights are computed here, in Go's IEEE double
// arithmetic as Pillow's C computes them (no fused multiply-adds); the
// passes that apply them are integer arithmetic in C (resize.c).
func pilCoeffs(in, out int) (first, count []C.int, k []int32, ksize int) {
	scale := float64(in) / float64(out)
	filterscale := max(scale, 1)
	support := filterscale // the triangle's support, 1, widened
	ksize = int(ceilf(support))*2 + 1
	first, count = make([]C.int, out), make([]C.int, out)
	k = make([]int32, out*ksize)
	w := make([]float64, ksize)
	for xx := range out {
		center := (float64(xx) + 0.5) * scale
		ss := 1 / filterscale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), in) - xmin
		var total float64
		for x := range xmax {
			v := triangle((float64(x+xmin) - center + 0.5) * ss)
			w[x] = v
			total += v
		}
		for x := range xmax {
			v := w[x]
			if total != 0 {
				v /= total
			}
			if v < 0 {
				k[xx*ksize+x] = int32(-0.5 + v*(1<<pilBits))
			} else {
				k[xx*ksize+x] = int32(0.5 + v*(1<<pilBits))
			}
		}
		first[xx], count[xx] = C.int(xmin), C.int(xmax)
	}
	return first, count, k, ksize
}

func triangle(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

func ceilf(x float64) float64 {
	i := float64(int(x))
	if i < x {
		return i + 1
	}
	return i
}

// Resize scales img (h rows of w pixels of c interleaved bytes, as
// Pillow's RGB or L) to ow x oh with Pillow's bilinear filter; dst, if
// long enough, receives the result (returned either way).
func Resize(dst, img []uint8, w, h, c, ow, oh int) []uint8 {
	return resizeBox(dst, img, w, c, Box{0, 0, w, h}, ow, oh)
}

// resizeBox is Resize of the box of img (w pixels wide) inside the image,
// read in place: torchvision's crop then resize without the copy.
func resizeBox(dst, img []uint8, W, c int, b Box, ow, oh int) []uint8 {
	w, h := b.Width, b.Height
	if len(dst) < ow*oh*c {
		dst = make([]uint8, ow*oh*c)
	}
	dst = dst[:ow*oh*c]
	if ow == w {
		// No horizontal pass: the vertical one reads whole rows of the box.
		if b.X != 0 || W != w {
			img = crop(img, W, b.Y+b.Height, c, b)
			W, b.Y = w, 0
		}
		img = img[b.Y*W*c:]
		if oh == h {
			copy(dst, img)
			return dst
		}
	}
	vFirst, vCount, vk, vks := pilCoeffs(h, oh)
	src, sw, rows0 := img, w, 0
	if ow != w {
		// The horizontal pass over the rows the vertical one reads.
		y0, y1 := int(vFirst[0]), int(vFirst[oh-1]+vCount[oh-1])
		hFirst, hCount, hk, hks := pilCoeffs(w, ow)
		tmp := make([]uint8, (y1-y0)*ow*c)
		C.rs_horizontal((*C.uint8_t)(&img[((b.Y+y0)*W+b.X)*c]), C.long(W*c), C.int(c), C.int(y1-y0), (*C.uint8_t)(&tmp[0]), C.int(ow),
			&hFirst[0], &hCount[0], (*C.int32_t)(unsafe.Pointer(&hk[0])), C.int(hks))
		src, sw, rows0 = tmp, ow, y0
	}
	if oh == h && ow != w {
		copy(dst, src)
		return dst
	}
	C.rs_vertical((*C.uint8_t)(&src[0]), C.int(sw*c), C.int(rows0), (*C.uint8_t)(&dst[0]), C.int(oh),
		&vFirst[0], &vCount[0], (*C.int32_t)(unsafe.Pointer(&vk[0])), C.int(vks))
	return dst
}
