package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"train/openblas"
)

// BenchmarkConvStrided times ResNet-20's convolutions that are not 3x3
// stride 1 (the stride-2 3x3 ones and the stride-2 1x1 projections), 64
// images, one thread, forward and backward (input and weight gradients)
// apart, through im2col and OpenBLAS and directly (conv_direct.c, where
// the CPU has AVX-512; --conv winograd's choice), with its row paths
// (direct) and without (direct-ptr, every pixel through the pointer
// blocks): the per-layer peers of
// scripts/bench/torch_layers.py's rows of the same names, which `train
// bench step --passes` lumps into its t_conv_* and t_direct_* rows.
func BenchmarkConvStrided(b *testing.B) {
	if _, err := openblas.Load("", 1); err != nil {
		b.Fatal(err)
	}
	defer UseWinograd(winograd)
	for _, sh := range []struct {
		name              string
		c, o, h, k, s, pd int
	}{
		{"3x3_s2_16-32", 16, 32, 28, 3, 2, 1}, {"3x3_s2_32-64", 32, 64, 14, 3, 2, 1},
		{"1x1_s2_16-32", 16, 32, 28, 1, 2, 0}, {"1x1_s2_32-64", 32, 64, 14, 1, 2, 0},
	} {
		const n = 64
		p := &Params{}
		conv := NewConv2D(p, "c", sh.c, sh.h, sh.h, sh.o, sh.k, sh.s, sh.pd, false)
		p.Alloc()
		conv.init(rand.New(rand.NewPCG(1, 2)))
		x, y := normals(rand.New(rand.NewPCG(3, 4)), n*conv.InSize()), make([]float32, n*conv.OutSize())
		dx, dy := make([]float32, n*conv.InSize()), normals(rand.New(rand.NewPCG(5, 6)), n*conv.OutSize())
		oh := (sh.h+2*sh.pd-sh.k)/sh.s + 1
		flop := float64(2 * n * oh * oh * sh.o * sh.c * sh.k * sh.k)
		for i, path := range []string{"im2col", "direct", "direct-ptr"} {
			direct, rows := i > 0, i == 1
			UseWinograd(direct)
			if direct && !conv.strided() {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s/fwd", sh.name, path), func(b *testing.B) {
				UseWinograd(direct)
				defer directRows(directRows(rows))
				for b.Loop() {
					conv.Forward(y, x, n)
				}
				b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
			b.Run(fmt.Sprintf("%s/%s/bwd", sh.name, path), func(b *testing.B) {
				UseWinograd(direct)
				defer directRows(directRows(rows))
				conv.Forward(y, x, n)
				for b.Loop() {
					conv.Backward(dx, dy, x, y, n)
				}
				b.ReportMetric(2*flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
