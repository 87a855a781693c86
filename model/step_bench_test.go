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

// BenchmarkGPTStep times one training step of the 6-layer, 384-wide GPT
// with context 256 and GPT-2's vocabulary, batch 4, on one thread, and
// reports tokens/s and GEMM GFLOP/s: the step `train bench step --model
// gpt` runs, without the data, the allreduce and the update.
func BenchmarkGPTStep(b *testing.B) {
	if _, err := openblas.Load("", 1); err != nil {
		b.Fatal(err)
	}
	g := &model.GPTConfig{Layers: 6, Heads: 6, Dim: 384, Context: 256, Vocab: 50257, VocabPadded: 50304}
	m, err := model.Build(model.Config{Kind: "gpt", Classes: g.Vocab, GPT: g})
	if err != nil {
		b.Fatal(err)
	}
	m.Init(1)
	const n = 4
	x := make([]float32, n*g.Context)
	y := make([]int32, n*g.Context)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(rng.IntN(g.Vocab))
		y[i] = int32(rng.IntN(g.Vocab))
	}
	_, flops := m.FLOPs()
	b.ResetTimer()
	for range b.N {
		clear(m.Params.Grad)
		logits := m.Forward(x, n)
		m.Loss(m.LossGrad(n), logits, y, n*g.Context)
		m.Backward(n)
	}
	sps := float64(b.N*n) / b.Elapsed().Seconds()
	b.ReportMetric(sps*float64(g.Context), "tokens/s")
	b.ReportMetric(sps*float64(flops)/1e9, "GFLOP/s")
}
