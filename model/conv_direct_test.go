package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConvDirect: strided convolutions through conv_direct.c against
// their float64 definitions (directConv, convGrads), within im2col's
// bound: ResNet-20's and ResNet-50's stride-2 shapes, and shapes that
// reach every block width (16 to 64 channels a block, 128 in two), sides
// that are odd or too short for a whole block, kernels of 1, 2, 5 and 7,
// stride 3 (dx pixels that no tap reaches) and a padding that exceeds
// the stride; a bias on every third shape (the forward then adds to y).
// Several images, so that the weight gradient sums several parts and a
// block of pixels spans images. Then the same bits at 1 and 3 threads,
// and with the row paths off (every pixel through the pointer blocks).
func TestConvDirect(t *testing.T) {
	defer UseWinograd(winograd)
	defer SetThreads(1)
	UseWinograd(true)
	probe := NewConv2D(&Params{}, "c", 16, 8, 8, 16, 3, 2, 1, false)
	if !probe.strided() {
		t.Skip("this CPU lacks AVX-512 (x86-64-v4): strided convolutions keep im2col here, and conv_direct.c cannot run")
	}
	for si, sh := range [][8]int{ // n, h, w, c, o, k, stride, pad
		{5, 28, 28, 16, 32, 3, 2, 1}, {3, 14, 14, 32, 64, 3, 2, 1}, {5, 28, 28, 16, 32, 1, 2, 0},
		{2, 9, 7, 48, 16, 3, 2, 1}, {2, 11, 13, 16, 80, 5, 3, 2}, {1, 8, 8, 128, 128, 3, 2, 1},
		{2, 15, 15, 16, 16, 7, 2, 3}, {3, 6, 7, 16, 48, 2, 2, 0}, {2, 10, 10, 32, 16, 1, 3, 0},
		{1, 5, 5, 64, 32, 3, 2, 2}, {4, 3, 3, 16, 16, 3, 2, 1},
	} {
		n, h, w, c, o, k, st, pd := sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], sh[6], sh[7]
		// A bias every third shape: the forward then adds to y holding it
		// (the kernels' add path).
		bias := si%3 == 1
		p := &Params{}
		conv := NewConv2D(p, "c", c, h, w, o, k, st, pd, bias)
		p.Alloc()
		if !conv.strided() {
			t.Fatalf("%v: not run directly", sh)
		}
		rng := rand.New(rand.NewPCG(uint64(h*w), 11))
		conv.init(rng)
		var b []float32
		if bias {
			b = conv.B.Of(p.Data)
			copy(b, normals(rng, o))
		}
		x, dy := normals(rng, n*conv.InSize()), normals(rng, n*conv.OutSize())
		run := func(threads int) (y, dx, dw []float32) {
			SetThreads(threads)
			y, dx = make([]float32, n*conv.OutSize()), make([]float32, n*conv.InSize())
			for i := range dx {
				dx[i] = float32(i) // every element must be set, including those no tap reaches
			}
			conv.Forward(y, x, n)
			clear(p.Grad)
			conv.Backward(dx, dy, x, y, n)
			return y, dx, slices.Clone(conv.W.Of(p.Grad))
		}
		y, dx, dw := run(1)
		wantDx, wantDw := convGrads(x, conv.W.Of(p.Data), dy, n, h, w, c, o, k, st, pd)
		wantY := directConv(x, conv.W.Of(p.Data), n, h, w, c, o, k, st, pd)
		for i := range wantY {
			if bias {
				wantY[i] += float64(b[i%o])
			}
		}
		ey := maxRelErr(y, wantY)
		ex, ew := maxRelErr(dx, wantDx), maxRelErr(dw, wantDw)
		t.Logf("%v (bias %v): max error / max |.|: y %.2g, dx %.2g, dw %.2g", sh, bias, ey, ex, ew)
		if !(ey < tolerance[0]) || !(ex < tolerance[0]) || !(ew < tolerance[0]) {
			t.Errorf("%v: errors y %.3g, dx %.3g, dw %.3g of the largest value, want below %g", sh, ey, ex, ew, tolerance[0])
		}
		y3, dx3, dw3 := run(3)
		sameConvBits(t, fmt.Sprintf("%v: ", sh), "at 3 threads", [3][]float32{y, dx, dw}, [3][]float32{y3, dx3, dw3})
		directRows(false)
		yp, dxp, dwp := run(1)
		directRows(true)
		sameConvBits(t, fmt.Sprintf("%v: ", sh), "with the row paths off", [3][]float32{y, dx, dw}, [3][]float32{yp, dxp, dwp})
	}
	// Under --conv im2col, and where a side is not a multiple of 16, im2col.
	UseWinograd(false)
	if probe.strided() {
		t.Errorf("strided convolution run directly under --conv im2col")
	}
	UseWinograd(true)
	if NewConv2D(&Params{}, "c", 3, 8, 8, 16, 3, 2, 1, false).strided() {
		t.Errorf("3 input channels run directly")
	}
}

// TestConvDirectRandomShapes: 80 seeded random strided shapes (kernels 1
// to 5, strides 2 and 3, paddings below the kernel, sides k to k+15, 16
// to 80 channels in and out, a bias or not, 1 to 3 images) against the
// float64 definitions, and the same bits with the row paths off at 2
// threads: the edges, leftovers and row-block sizes that the hand-picked
// shapes above may miss.
func TestConvDirectRandomShapes(t *testing.T) {
	defer UseWinograd(winograd)
	defer SetThreads(1)
	UseWinograd(true)
	if !NewConv2D(&Params{}, "c", 16, 8, 8, 16, 3, 2, 1, false).strided() {
		t.Skip("this CPU lacks AVX-512 (x86-64-v4): strided convolutions keep im2col here, and conv_direct.c cannot run")
	}
	rng := rand.New(rand.NewPCG(7, 11))
	chs := []int{16, 32, 48, 64, 80}
	for range 80 {
		k, st := 1+rng.IntN(5), 2+rng.IntN(2)
		pd, h, w := rng.IntN(k), k+rng.IntN(16), k+rng.IntN(16)
		c, o, n, bias := chs[rng.IntN(5)], chs[rng.IntN(5)], 1+rng.IntN(3), rng.IntN(2) == 0
		sh := fmt.Sprintf("n %d, %dx%d, %d -> %d, k %d, stride %d, pad %d, bias %v", n, h, w, c, o, k, st, pd, bias)
		p := &Params{}
		conv := NewConv2D(p, "c", c, h, w, o, k, st, pd, bias)
		p.Alloc()
		if !conv.strided() {
			t.Fatalf("%s: not run directly", sh)
		}
		conv.init(rng)
		if bias {
			copy(conv.B.Of(p.Data), normals(rng, o))
		}
		x, dy := normals(rng, n*conv.InSize()), normals(rng, n*conv.OutSize())
		run := func(threads int) (y, dx, dw []float32) {
			SetThreads(threads)
			y, dx = make([]float32, n*conv.OutSize()), make([]float32, n*conv.InSize())
			for i := range dx {
				dx[i] = float32(i)
			}
			conv.Forward(y, x, n)
			clear(p.Grad)
			conv.Backward(dx, dy, x, y, n)
			return y, dx, slices.Clone(conv.W.Of(p.Grad))
		}
		y, dx, dw := run(1)
		wantY := directConv(x, conv.W.Of(p.Data), n, h, w, c, o, k, st, pd)
		if bias {
			b := conv.B.Of(p.Data)
			for i := range wantY {
				wantY[i] += float64(b[i%o])
			}
		}
		wantDx, wantDw := convGrads(x, conv.W.Of(p.Data), dy, n, h, w, c, o, k, st, pd)
		if ey, ex, ew := maxRelErr(y, wantY), maxRelErr(dx, wantDx), maxRelErr(dw, wantDw); !(ey < tolerance[0]) || !(ex < tolerance[0]) || !(ew < tolerance[0]) {
			t.Errorf("%s: errors y %.3g, dx %.3g, dw %.3g of the largest value, want below %g", sh, ey, ex, ew, tolerance[0])
		}
		directRows(false)
		yp, dxp, dwp := run(2)
		directRows(true)
		sameConvBits(t, sh+": ", "with the row paths off at 2 threads", [3][]float32{y, dx, dw}, [3][]float32{yp, dxp, dwp})
	}
}
