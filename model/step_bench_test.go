package model_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"train/model"
	"train/openblas"
)

// BenchmarkStep times one training step (forward, loss, backward) of each
// model on one thread with OpenBLAS, batch 64 of 1x28x28, and reports
// samples/s and GEMM GFLOP/s.
func BenchmarkStep(b *testing.B) {
	if _, err := openblas.Load("", 1); err != nil {
		b.Fatal(err)
	}
	for _, cfg := range []model.Config{
		{Kind: "mlp", Hidden: []int{256}},
		{Kind: "cnn"},
		{Kind: "resnet", Depth: 20},
	} {
		cfg.Input, cfg.Classes = [3]int{1, 28, 28}, 10
		b.Run(fmt.Sprintf("%s%d", cfg.Kind, cfg.Depth), func(b *testing.B) {
			m, err := model.Build(cfg)
			if err != nil {
				b.Fatal(err)
			}
			m.Init(1)
			const n = 64
			x := make([]float32, n*784)
			y := make([]int32, n)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for i := range y {
				y[i] = int32(rng.IntN(10))
			}
			_, flops := m.FLOPs()
			b.ResetTimer()
			for range b.N {
				clear(m.Params.Grad)
				logits := m.Forward(x, n)
				model.SoftmaxCrossEntropy(m.LossGrad(n), logits, y, n, 10)
				m.Backward(n)
			}
			sps := float64(b.N*n) / b.Elapsed().Seconds()
			b.ReportMetric(sps, "samples/s")
			b.ReportMetric(sps*float64(flops)/1e9, "GFLOP/s")
		})
	}
}
