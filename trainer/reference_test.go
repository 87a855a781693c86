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
