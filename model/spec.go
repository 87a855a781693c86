package model

// Spec describes one layer for another executor of the same network (the
// GPU path, package gpu): its kind, shapes and where its tensors lie in
// the flat buffers. Executors build from Specs, so the network is defined
// once, here.
type Spec struct {
	// Kind is one of linear, relu, conv, bn, maxpool, avgpool, nhwc,
	// flatten, block, and for gpt embedding, gpt (a transformer block),
	// layernorm, conv1d, gelu and head (tied to the embedding's W).
	Kind    string
	In, Out int // values per sample
	// Parameters (Data and Grad offsets) and buffers (Buffers offsets).
	W, B    Tensor
	HasBias bool
	// Convolution (square kernel), BatchNorm and pooling shapes.
	InC, InH, InW, OutC, OutH, OutW int
	K, Stride, Pad                  int
	KH, KW                          int // pooling window
	Mean, Var, Batches              Tensor
	ReLU                            bool // BatchNorm with a fused ReLU
	// Block: conv1, bn1, conv2, bn2 and, with a projection shortcut,
	// its convolution and BatchNorm. gpt: ln_1, attn.c_attn,
	// attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj.
	Parts []Spec
	// The GPT's shapes: positions per sample, the width of a row (C, or
	// a linear map's input), a linear map's output, heads, the
	// embedding's rows (the padded vocabulary) and the head's vocabulary.
	// Shards > 1: a tensor-parallel shard (its sizes).
	T, Width, OutWidth, Heads, Rows, Vocab, Shards int
}

// Specs describes the model's layers in order.
func (m *Model) Specs() []Spec {
	out := make([]Spec, len(m.Layers))
	for i, l := range m.Layers {
		out[i] = l.(specer).spec()
	}
	return out
}

type specer interface{ spec() Spec }

func (l *Linear) spec() Spec {
	return Spec{Kind: "linear", In: l.in, Out: l.out, W: l.W, B: l.B, HasBias: true}
}

func (r *ReLU) spec() Spec { return Spec{Kind: "relu", In: r.size, Out: r.size} }

func (c *Conv2D) spec() Spec {
	return Spec{Kind: "conv", In: c.InSize(), Out: c.OutSize(), W: c.W, B: c.B, HasBias: c.bias,
		InC: c.inC, InH: c.inH, InW: c.inW, OutC: c.outC, OutH: c.outH, OutW: c.outW, K: c.k, Stride: c.stride, Pad: c.pad}
}

func (l *BatchNorm2d) spec() Spec {
	return Spec{Kind: "bn", In: l.InSize(), Out: l.OutSize(), W: l.W, B: l.B, OutC: l.c, InC: l.c,
		Mean: l.mean, Var: l.vari, Batches: l.batches, ReLU: l.relu, OutH: l.hw, OutW: 1, InH: l.hw, InW: 1}
}

func (l *MaxPool2d) spec() Spec {
	return Spec{Kind: "maxpool", In: l.InSize(), Out: l.OutSize(), InC: l.c, InH: l.h, InW: l.w, OutC: l.c, OutH: l.oh, OutW: l.ow, KH: l.k, KW: l.k,
		Stride: l.stride, Pad: l.pad}
}

func (l *AvgPool2d) spec() Spec {
	return Spec{Kind: "avgpool", In: l.InSize(), Out: l.OutSize(), InC: l.c, InH: l.h, InW: l.w, OutC: l.c, OutH: l.oh, OutW: l.ow, KH: l.kh, KW: l.kw}
}

func (l *ToNHWC) spec() Spec {
	return Spec{Kind: "nhwc", In: l.InSize(), Out: l.OutSize(), InC: l.c, InH: l.h, InW: l.w}
}

func (l *Flatten) spec() Spec {
	return Spec{Kind: "flatten", In: l.InSize(), Out: l.OutSize(), InC: l.c, InH: l.h, InW: l.w}
}

func (b *BasicBlock) spec() Spec {
	s := Spec{Kind: "block", In: b.in, Out: b.out}
	for _, p := range b.parts() {
		s.Parts = append(s.Parts, p.(specer).spec())
	}
	return s
}

func (e *Embedding) spec() Spec {
	return Spec{Kind: "embedding", In: e.InSize(), Out: e.OutSize(), W: e.WTE, B: e.WPE, T: e.t, Width: e.c, Rows: e.rows}
}

func (l *LayerNorm) spec() Spec {
	return Spec{Kind: "layernorm", In: l.InSize(), Out: l.OutSize(), W: l.W, B: l.B, T: l.per, Width: l.c}
}

func (l *Conv1D) spec() Spec {
	return Spec{Kind: "conv1d", In: l.InSize(), Out: l.OutSize(), W: l.W, B: l.B, HasBias: true, T: l.per, Width: l.in, OutWidth: l.out}
}

func (b *GPTBlock) spec() Spec {
	s := Spec{Kind: "gpt", In: b.InSize(), Out: b.OutSize(), T: b.t, Width: b.c, Heads: b.attn.h, Shards: b.c / b.attn.cl}
	for _, l := range []specer{b.ln1, b.attn.cAttn, b.attn.cProj, b.ln2, b.fc, b.proj} {
		s.Parts = append(s.Parts, l.spec())
	}
	return s
}

func (h *TiedHead) spec() Spec {
	return Spec{Kind: "head", In: h.InSize(), Out: h.OutSize(), W: h.e.WTE, T: h.per, Width: h.c, Vocab: h.vocab}
}

// Act is the activation at layer boundary i of the last Forward (0 the
// input, len(Layers) the logits), in the CPU path's layout (NHWC inside
// the convolutional part): for conformance tests against other executors.
func (m *Model) Act(i int) []float32 { return m.acts[i] }

// ActGrad is the loss's gradient at boundary i after Backward (i >= 1).
func (m *Model) ActGrad(i int) []float32 { return m.grads[i] }
