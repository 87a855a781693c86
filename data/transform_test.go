package data

import (
	"math/rand/v2"
	"testing"
)

// TestRandomResizedCropBox: every box lies in the image, with an area of
// 8% to 100% of it and an aspect ratio within 3/4 to 4/3 (up to the
// rounding of its sides); images too narrow or too wide for ten tries
// get torchvision's fallback, worked by hand: the whole short side, the
// long side round(short x 4/3), centred.
func TestRandomResizedCropBox(t *testing.T) {
	scale, ratio := [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][2]int{{224, 224}, {500, 375}, {33, 600}, {32, 32}} {
		for range 2000 {
			b := RandomResizedCropBox(s[0], s[1], scale, ratio, r)
			if b.X < 0 || b.Y < 0 || b.Width < 1 || b.Height < 1 || b.X+b.Width > s[0] || b.Y+b.Height > s[1] {
				t.Fatalf("%v: box %+v outside the image", s, b)
			}
			area := float64(b.Width*b.Height) / float64(s[0]*s[1])
			aspect := float64(b.Width) / float64(b.Height)
			slack := 1 / float64(min(b.Width, b.Height)) // a side's rounding
			if area < scale[0]*(1-4*slack) || area > 1 || aspect < ratio[0]*(1-2*slack) || aspect > ratio[1]*(1+2*slack) {
				t.Fatalf("%v: box %+v: area %.3f, aspect %.3f", s, b, area, aspect)
			}
		}
	}
	// Ten tries cannot fit a box of ratio 3/4 to 4/3 into 1000x10 or 10x1000.
	for _, c := range []struct {
		w, h int
		want Box
	}{{1000, 10, Box{X: 493, Y: 0, Width: 13, Height: 10}}, {10, 1000, Box{X: 0, Y: 493, Width: 10, Height: 13}}} {
		if b := RandomResizedCropBox(c.w, c.h, scale, ratio, r); b != c.want {
			t.Errorf("%dx%d: %+v, want %+v", c.w, c.h, b, c.want)
		}
	}
	if a, b := RandomResizedCropBox(500, 375, scale, ratio, rand.New(rand.NewPCG(5, 6))), RandomResizedCropBox(500, 375, scale, ratio, rand.New(rand.NewPCG(5, 6))); a != b {
		t.Errorf("the same draws gave %+v and %+v", a, b)
	}
}
