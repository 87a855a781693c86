package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"train/gpu"
	"train/internal/near"
	"train/model"
)

// TestGPTConformance: the GPT's layers on the GPU (embedding, LayerNorm,
// the linear maps, GELU, the causal attention kernels, the tied head and
// the loss over every position) against the CPU path from the same
// weights and tokens: the logits, every activation and its gradient, the
// loss and every parameter gradient within 1e-4 relative in fp32. Heads of
// 16, 40 and 64 dimensions take the tiled attention (flash.cu; 100
// positions are two tiles of 64, the second partly past the end, the
// causal mask crossing both), heads of 96 the warp-per-row one (gpt.cu).
func TestGPTConformance(t *testing.T) {
	c := open(t)
	for _, g := range []model.GPTConfig{
		{Layers: 2, Heads: 2, Dim: 32, Context: 16, Vocab: 61, VocabPadded: 64},
		{Layers: 1, Heads: 2, Dim: 80, Context: 9, Vocab: 50, VocabPadded: 50},
		{Layers: 1, Heads: 2, Dim: 128, Context: 100, Vocab: 40, VocabPadded: 40},
		{Layers: 1, Heads: 1, Dim: 96, Context: 9, Vocab: 30, VocabPadded: 32},
	} {
		t.Run(fmt.Sprintf("L%d-H%d-C%d-T%d", g.Layers, g.Heads, g.Dim, g.Context), func(t *testing.T) {
			conformGPT(t, c, g, 3)
		})
	}
}

func conformGPT(t *testing.T, c *gpu.Ctx, g model.GPTConfig, b int) {
	m, err := model.Build(model.Config{Kind: "gpt", Classes: g.Vocab, GPT: &g})
	if err != nil {
		t.Fatal(err)
	}
	m.Init(7)
	m.KeepActGrads = true
	p := m.Params
	net, err := gpu.NewNet(c, m)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rows := b * g.Context
	x, y := make([]float32, rows), make([]int32, rows)
	for i := range x {
		x[i] = float32(rng.IntN(g.Vocab))
		y[i] = int32(rng.IntN(g.Vocab))
	}

	logits := m.Forward(x, b)
	wantLogits := slices.Clone(logits)
	loss, correct := m.Loss(m.LossGrad(b), logits, y, rows)
	clear(p.Grad)
	m.Backward(b)

	net.G.Zero()
	if err := net.Forward(x, b); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(wantLogits))
	if err := net.Logits(got, b); err != nil {
		t.Fatal(err)
	}
	if err := near.CheckFloor(wantLogits, got, 1e-4, 1e-6); err != nil {
		t.Errorf("logits: GPU against CPU: %v", err)
	}
	gl, gc, err := net.Loss(y, b, true)
	if err != nil {
		t.Fatal(err)
	}
	if !near.Close(loss, gl, 1e-5, 0) || gc != correct {
		t.Errorf("loss %v correct %d on the GPU, %v %d on the CPU", gl, gc, loss, correct)
	}
	if err := net.Backward(b); err != nil {
		t.Fatal(err)
	}
	specs := m.Specs()
	for i := 1; i < len(specs); i++ { // the last boundary is the logits, compared above
		for _, grad := range []bool{false, true} {
			cpu, what, get := m.Act(i), "activation", net.Act
			if grad {
				cpu, what, get = m.ActGrad(i), "gradient", net.ActGrad
			}
			v, err := get(i, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := near.CheckFloor(cpu[:len(v)], v, 1e-4, 1e-6); err != nil {
				t.Errorf("%s after layer %d (%s): GPU against CPU: %v", what, i-1, specs[i-1].Kind, err)
			}
		}
	}
	grads := make([]float32, len(p.Grad))
	if err := net.G.Download(grads); err != nil {
		t.Fatal(err)
	}
	for _, tn := range p.Tensors {
		if err := near.CheckFloor(tn.Of(p.Grad), tn.Of(grads), 1e-4, 1e-6); err != nil {
			t.Errorf("gradient of %s: GPU against CPU: %v", tn.Name, err)
		}
	}

	// Evaluation: the loss alone, another batch size.
	b2 := b - 1
	wantLoss, _ := m.Loss(nil, m.Forward(x, b2), y, b2*g.Context)
	if err := net.Forward(x, b2); err != nil {
		t.Fatal(err)
	}
	gotLoss, _, err := net.Loss(y, b2, false)
	if err != nil {
		t.Fatal(err)
	}
	if !near.Close(wantLoss, gotLoss, 1e-5, 0) {
		t.Errorf("evaluation loss %v on the GPU, %v on the CPU", gotLoss, wantLoss)
	}
}
