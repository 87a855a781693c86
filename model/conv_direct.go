package model

/*
#include "kernels.h"
*/
import "C"

// directPath: a strided layer of multiples of 16 channels computed
// directly on AVX-512 (conv_direct.c), each pass from W itself, PyTorch's
// layout, which par.c permutes for it.
type directPath struct{}

// strided reports whether this convolution takes directPath: stride 2
// and up, multiples of 16 channels in and out, on a CPU with AVX-512,
// under --conv winograd (as few); im2col and OpenBLAS otherwise.
// Against im2col (BenchmarkConvStrided, one thread, 64 images, three
// rounds interleaved on a68dd94): ResNet-20's 3x3 stride-2 16 -> 32
// layer's forward and backward in 6.2 to 8.2 ms against 8.4 to 12.2.
func (c *Conv2D) strided() bool {
	return winograd && c.stride > 1 && C.k_direct_ok(C.size_t(c.inC), C.size_t(c.outC), C.size_t(c.k)) != 0
}

func (directPath) forward(c *Conv2D, y, x []float32, n int, beta float32) {
	C.k_direct_forward(c.shape(n), f32(y), f32(x), f32(c.W.Of(c.p.Data)), C.float(beta))
}

func (directPath) weightGrad(c *Conv2D, dw, dy, x []float32, n int) {
	C.k_direct_dw(c.shape(n), f32(dw), f32(dy), f32(x))
}

func (directPath) inputGrad(c *Conv2D, dx, dy []float32, n int) {
	C.k_direct_dx(c.shape(n), f32(dx), f32(dy), f32(c.W.Of(c.p.Data)))
}

// directRows turns conv_direct.c's row paths on or off (off: every pixel
// through the pointer blocks), for the test that holds the two to the
// same bits, and reports whether they were on.
func directRows(on bool) bool { return C.k_direct_rows(cbool(on)) != 0 }
