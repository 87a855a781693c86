package data

// #include "resize.h"
import "C"

import (
	"math"
	"math/rand/v2"
)

// torchvision's ImageNet transforms on decoded RGB images (h rows of w
// pixels, 3 interleaved bytes), with its PIL path's arithmetic, so that
// for the same crop box and flip the pixels are torchvision's
// (TestTorchvisionTransforms):
//
//	training:   RandomResizedCrop(size) (scale 0.08 to 1, ratio 3/4 to 4/3), RandomHorizontalFlip
//	evaluation: Resize(resize) (the shorter side), CenterCrop(size)
//	both:       ToTensor, Normalize(mean, std)

// ImageNet's per-channel mean and standard deviation (torchvision's).
var (
	ImageNetMean = [3]float32{0.485, 0.456, 0.406}
	ImageNetStd  = [3]float32{0.229, 0.224, 0.225}
)

// Box is a crop: Width x Height pixels from column X, row Y.
type Box struct{ X, Y, Width, Height int }

// RandomResizedCropBox draws RandomResizedCrop.get_params's box for a
// w x h image from r: up to ten tries of an area (scale of the image's)
// and a log-uniform aspect ratio that fit, else the largest centred box
// within the ratios.
func RandomResizedCropBox(w, h int, scale, ratio [2]float64, r *rand.Rand) Box {
	area := float64(w * h)
	lr0, lr1 := math.Log(ratio[0]), math.Log(ratio[1])
	for range 10 {
		target := area * (scale[0] + r.Float64()*(scale[1]-scale[0]))
		aspect := math.Exp(lr0 + r.Float64()*(lr1-lr0))
		cw := int(math.RoundToEven(math.Sqrt(target * aspect)))
		ch := int(math.RoundToEven(math.Sqrt(target / aspect)))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			return Box{X: r.IntN(w - cw + 1), Y: r.IntN(h - ch + 1), Width: cw, Height: ch}
		}
	}
	cw, ch := w, h
	switch in := float64(w) / float64(h); {
	case in < ratio[0]:
		ch = int(math.RoundToEven(float64(cw) / ratio[0]))
	case in > ratio[1]:
		cw = int(math.RoundToEven(float64(ch) * ratio[1]))
	}
	return Box{X: (w - cw) / 2, Y: (h - ch) / 2, Width: cw, Height: ch}
}

// crop copies box out of img (w wide), c bytes a pixel; parts of the box
// outside the image are 0, as torchvision's padding crop has them.
func crop(img []uint8, w, h, c int, b Box) []uint8 {
	out := make([]uint8, b.Width*b.Height*c)
	x0, x1 := max(b.X, 0), min(b.X+b.Width, w) // the columns inside the image
	if x0 >= x1 {
		return out
	}
	for y := range b.Height {
		if sy := b.Y + y; sy >= 0 && sy < h {
			copy(out[(y*b.Width+x0-b.X)*c:(y*b.Width+x1-b.X)*c], img[(sy*w+x0)*c:(sy*w+x1)*c])
		}
	}
	return out
}

// flipRows mirrors img (w wide, c bytes a pixel) left to right in place.
func flipRows(img []uint8, w, h, c int) {
	if c == 3 {
		for y := range h {
			row := img[y*w*3 : (y+1)*w*3]
			for a, b := 0, 3*(w-1); a < b; a, b = a+3, b-3 {
				p, q := row[a:a+3:a+3], row[b:b+3:b+3]
				p[0], p[1], p[2], q[0], q[1], q[2] = q[0], q[1], q[2], p[0], p[1], p[2]
			}
		}
		return
	}
	for y := range h {
		row := img[y*w*c : (y+1)*w*c]
		for a, b := 0, w-1; a < b; a, b = a+1, b-1 {
			for k := range c {
				row[a*c+k], row[b*c+k] = row[b*c+k], row[a*c+k]
			}
		}
	}
}

// TrainCrop is torchvision's resized_crop(img, box, (size, size)) then,
// with flip, hflip: the training view of an RGB image.
func TrainCrop(img []uint8, w, h int, b Box, size int, flip bool) []uint8 {
	if b.X < 0 || b.Y < 0 || b.X+b.Width > w || b.Y+b.Height > h {
		img, w, h, b = crop(img, w, h, 3, b), b.Width, b.Height, Box{0, 0, b.Width, b.Height}
	}
	out := resizeBox(nil, img, w, 3, b, size, size)
	if flip {
		flipRows(out, size, size, 3)
	}
	return out
}

// EvalCrop is Resize(resize) then CenterCrop(size): the shorter side
// scaled to resize (the longer to int(resize * long / short), as
// torchvision truncates), then the centre size x size (offsets rounded
// half to even, as Python's round).
func EvalCrop(img []uint8, w, h, resize, size int) []uint8 {
	ow, oh := resize, resize
	if w <= h {
		oh = int(float64(resize) * float64(h) / float64(w))
	} else {
		ow = int(float64(resize) * float64(w) / float64(h))
	}
	r := Resize(nil, img, w, h, 3, ow, oh)
	top := int(math.RoundToEven(float64(oh-size) / 2))
	left := int(math.RoundToEven(float64(ow-size) / 2))
	return crop(r, ow, oh, 3, Box{X: left, Y: top, Width: size, Height: size})
}

// Normalize writes an RGB image (w x h) into dst as 3 planes (C, H, W) of
// (v/255 - mean) / std: ToTensor then Normalize.
func Normalize(dst []float32, img []uint8, w, h int, mean, std [3]float32) {
	_, _ = dst[3*w*h-1], img[3*w*h-1] // the lengths C relies on
	C.normalize_chw((*C.float)(&dst[0]), (*C.uint8_t)(&img[0]), C.long(w*h), (*C.float)(&mean[0]), (*C.float)(&std[0]))
}
