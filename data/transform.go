package data

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
	for y := range b.Height {
		sy := b.Y + y
		if sy < 0 || sy >= h {
			continue
		}
		for x := range b.Width {
			sx := b.X + x
			if sx >= 0 && sx < w {
				copy(out[(y*b.Width+x)*c:(y*b.Width+x+1)*c], img[(sy*w+sx)*c:(sy*w+sx+1)*c])
			}
		}
	}
	return out
}

// flipRows mirrors img (w wide, c bytes a pixel) left to right in place.
func flipRows(img []uint8, w, h, c int) {
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
	out := Resize(nil, crop(img, w, h, 3, b), b.Width, b.Height, 3, size, size)
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
	for c := range 3 {
		plane := dst[c*w*h : (c+1)*w*h]
		for i := range plane {
			plane[i] = (float32(img[3*i+c])/255 - mean[c]) / std[c]
		}
	}
}
