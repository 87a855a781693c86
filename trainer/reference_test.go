package trainer

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"

	"train/checkpoint"
	"train/internal/near"
	"train/model"
)

// referenceModel reads a file of scripts/torch_reference.py and builds
// the model its metadata names (parameters zero).
func referenceModel(t *testing.T, path string) (safetensors.SafeTensors, *model.Model) {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		t.Fatal(err)
	}
	_, md, _ := safetensors.ReadMetadata(buf)
	var cfg model.Config
	if err := json.Unmarshal([]byte(md.Metadata()["model"]), &cfg); err != nil {
		t.Fatal(err)
	}
	m, err := model.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st, m
}

// TestPyTorchReference compares one training-mode forward and backward of
// train's CNN, ResNet-8 and a 2-layer GPT (2 heads, width 16, context 16,
// batch 2, a vocabulary of 61 in a table of 64 rows) with PyTorch's
// (float64) on the same weights and batch, written by
// scripts/torch_reference.py into testdata/: the loss, the logits, every
// parameter gradient and the BatchNorm running statistics after the
// forward, each within 1e-4 relative (to the tensor's largest reference
// value; NaN or Inf fails).
func TestPyTorchReference(t *testing.T) {
	for _, name := range []string{"cnn", "resnet8", "gpt"} {
		t.Run(name, func(t *testing.T) {
			path := "../testdata/reference/" + name + ".safetensors"
			st, m := referenceModel(t, path)
			get := func(n string) safetensors.TensorView {
				v, ok := st.Tensor(n)
				if !ok {
					t.Fatalf("%s has no tensor %s", path, n)
				}
				return v
			}
			p := m.Params
			for _, tn := range append(append([]model.Tensor{}, p.Tensors...), p.BufferTensors...) {
				buf := p.Data
				if strings.Contains(tn.Name, "running_") || strings.Contains(tn.Name, "num_batches") {
					buf = p.Buffers
				}
				copy(checkpoint.Bytes(tn.Of(buf)), get("init."+tn.Name).Data())
			}
			x := floats(get("x")) // images, or token ids (int64) as float32
			lv := get("labels").Data()
			rows := len(lv) / 8 // one label per position
			labels := make([]int32, rows)
			for i := range labels {
				labels[i] = int32(binary.LittleEndian.Uint64(lv[8*i:]))
			}
			n := rows / m.Positions()
			clear(p.Grad)
			logits := slices.Clone(m.Forward(x, n)) // gpt's loss gradient overwrites them
			loss, _ := m.Loss(m.LossGrad(n), logits, labels, rows)
			m.Backward(n)

			wantLoss := math.Float64frombits(binary.LittleEndian.Uint64(get("loss").Data()))
			if !near.Close(wantLoss, loss, 1e-4, 0) {
				t.Errorf("loss %v, PyTorch %v", loss, wantLoss)
			}
			compare(t, "logits", logits, floats(get("logits")))
			for _, tn := range p.Tensors {
				compare(t, "grad "+tn.Name, tn.Of(p.Grad), floats(get("grad."+tn.Name)))
			}
			for _, tn := range p.BufferTensors {
				if tn.Int64 {
					if got, want := *p.Int64(tn), int64(binary.LittleEndian.Uint64(get("after."+tn.Name).Data())); got != want {
						t.Errorf("%s = %d, PyTorch %d", tn.Name, got, want)
					}
					continue
				}
				compare(t, tn.Name, tn.Of(p.Buffers), floats(get("after."+tn.Name)))
			}
			t.Logf("loss %.6f (PyTorch %.6f), %d gradient tensors", loss, wantLoss, len(p.Tensors))
		})
	}
}

func floats(v safetensors.TensorView) []float32 {
	d := v.Data()
	if v.DType() == safetensors.I64 {
		out := make([]float32, len(d)/8)
		for i := range out {
			out[i] = float32(int64(binary.LittleEndian.Uint64(d[8*i:])))
		}
		return out
	}
	out := make([]float32, len(d)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
	}
	return out
}

// compare checks got against want within 1e-4 of want's largest value;
// a NaN or an infinity anywhere fails.
func compare(t *testing.T, name string, got, want []float32) {
	t.Helper()
	if err := near.Check(want, got, 1e-4); err != nil {
		t.Errorf("%s: against PyTorch: %v", name, err)
	}
}

// TestInitFromHuggingFace loads the reference GPT's weights from the file
// the reference script writes the way Hugging Face's GPT2Model saves
// GPT-2's published weights (no "transformer." prefix, the 61-row token
// table where train pads to 64, causal-mask buffers, no lm_head), as
// --init-from does, and must get PyTorch's loss on the reference batch.
// A table for another vocabulary, a too short position table and a
// tensor the model lacks are refused, the parameters left untouched.
func TestInitFromHuggingFace(t *testing.T) {
	st, m := referenceModel(t, "../testdata/reference/gpt.safetensors")
	p := m.Params
	const hf = "../testdata/reference/gpt-hf.safetensors"
	if err := checkpoint.LoadWeights(hf, p, p.Data, p.Buffers, m.FitWeights, model.IgnoreWeight); err != nil {
		t.Fatal(err)
	}
	get := func(n string) []float32 {
		v, ok := st.Tensor(n)
		if !ok {
			t.Fatalf("no tensor %s", n)
		}
		return floats(v)
	}
	x := get("x")
	lv, _ := st.Tensor("labels")
	labels := make([]int32, len(lv.Data())/8)
	for i := range labels {
		labels[i] = int32(binary.LittleEndian.Uint64(lv.Data()[8*i:]))
	}
	loss, _ := m.Loss(nil, m.Forward(x, len(labels)/m.Positions()), labels, len(labels))
	lt, _ := st.Tensor("loss")
	want := math.Float64frombits(binary.LittleEndian.Uint64(lt.Data()))
	if !near.Close(want, loss, 1e-4, 0) {
		t.Errorf("loss after --init-from %s: %v, PyTorch %v", hf, loss, want)
	}
	wte, _ := p.Lookup("transformer.wte.weight")
	if pad := wte.Of(p.Data)[61*16:]; slices.ContainsFunc(pad, func(v float32) bool { return v != 0 }) {
		t.Errorf("padding rows of the token table not zero: %v", pad)
	}

	before := slices.Clone(p.Data)
	for _, tc := range []struct {
		name string
		cfg  model.GPTConfig
		want string
	}{
		{"vocabulary", model.GPTConfig{Layers: 2, Heads: 2, Dim: 16, Context: 16, Vocab: 256, VocabPadded: 256}, "data's vocabulary is 256"},
		{"context", model.GPTConfig{Layers: 2, Heads: 2, Dim: 16, Context: 32, Vocab: 61, VocabPadded: 64}, "fewer than --context 32"},
		{"layers", model.GPTConfig{Layers: 1, Heads: 2, Dim: 16, Context: 16, Vocab: 61, VocabPadded: 64}, `tensor "h.1.attn.c_attn.bias" is not in this model`},
	} {
		g := tc.cfg
		m2, err := model.Build(model.Config{Kind: "gpt", Classes: g.Vocab, GPT: &g})
		if err != nil {
			t.Fatal(err)
		}
		p2 := m2.Params
		err = checkpoint.LoadWeights(hf, p2, p2.Data, p2.Buffers, m2.FitWeights, model.IgnoreWeight)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), hf+": ") {
			t.Errorf("%s: error %v, want one naming the file and %q", tc.name, err, tc.want)
		}
		if slices.ContainsFunc(p2.Data, func(v float32) bool { return v != 0 }) {
			t.Errorf("%s: parameters written by a refused file", tc.name)
		}
	}
	if !slices.Equal(before, p.Data) {
		t.Error("the first model changed")
	}
}
