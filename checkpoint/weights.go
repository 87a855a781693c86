package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/nlpodyssey/safetensors"

	"train/params"
)

// Fit says whether a file's tensor of another shape than the model's
// tensor t goes into it by its leading rows (the same columns; t's rows
// past the file's are zeroed, the file's past t's dropped), and if not,
// why (nil: not at all, the shapes must be equal). A model may take a
// table of other rows than its own: GPT-2's published 50257-row embedding
// into a 50304-row one, or 1024 positions cut to the context trained.
type Fit func(t params.Tensor, shape []int) (ok bool, err error)

// LoadWeights reads the parameters (and buffers, where the file has them)
// of a safetensors file into data and buffers, which have p's layout:
// --init-from, to start from weights trained elsewhere. Only F32 tensors
// are read, by name; a tensor the model has but the file lacks is an
// error, and so is one the file has that the model does not, except
// optimizer state (our checkpoints) and names the caller ignores (GPT-2's
// causal-mask buffers). A name the model has under "transformer." may be
// in the file without it, as Hugging Face's GPT2Model saves them. Ties
// must equal their tensor over the rows both have. Nothing is written to
// data or buffers unless every check passes.
func LoadWeights(path string, p *params.Params, data, buffers []float32, fit Fit, ignore func(string) bool) error {
	if err := loadWeights(path, p, data, buffers, fit, ignore); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Metadata is the string metadata of the safetensors file at path (for a
// checkpoint: the model's configuration, the run's position), read from
// its header alone.
func Metadata(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, fmt.Errorf("not a safetensors file: %v", err)
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > 100<<20 {
		return nil, fmt.Errorf("not a safetensors file: a header of %d bytes", size)
	}
	h := make([]byte, size)
	if _, err := io.ReadFull(f, h); err != nil {
		return nil, fmt.Errorf("not a safetensors file: %v", err)
	}
	var header struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(h, &header); err != nil {
		return nil, fmt.Errorf("not a safetensors file: its header: %v", err)
	}
	return header.Meta, nil
}

func loadWeights(path string, p *params.Params, data, buffers []float32, fit Fit, ignore func(string) bool) error {
	_, st, err := readFile(path)
	if err != nil {
		return err
	}
	if fit == nil {
		fit = func(params.Tensor, []int) (bool, error) { return false, nil }
	}
	type job struct {
		dst []float32
		src []byte
	}
	var jobs []job
	used := map[string]bool{}
	find := func(name string) (safetensors.TensorView, string, bool) {
		for _, n := range []string{name, strings.TrimPrefix(name, "transformer.")} {
			if tv, ok := st.Tensor(n); ok {
				return tv, n, true
			}
		}
		return safetensors.TensorView{}, "", false
	}
	take := func(t params.Tensor, dst []float32) error {
		tv, name, ok := find(t.Name)
		if !ok {
			return fmt.Errorf("has no tensor %q (nor %q): weights for another model? (%d tensors, e.g. %s)", t.Name,
				strings.TrimPrefix(t.Name, "transformer."), len(st.Names()), strings.Join(first(st.Names(), 3), ", "))
		}
		used[name] = true
		if tv.DType() != safetensors.F32 {
			return fmt.Errorf("tensor %q is %v: --init-from reads F32 weights", name, tv.DType())
		}
		shape := make([]int, len(tv.Shape()))
		for i, d := range tv.Shape() {
			shape[i] = int(d)
		}
		if !slices.Equal(shape, t.Shape) {
			ok, err := fit(t, shape)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("tensor %q is %v, this model's %s is %v: use the sizes (--layers, --dim, --context, ...) the weights were trained with", name, shape, t.Name, t.Shape)
			}
		}
		jobs = append(jobs, job{t.Of(dst), tv.Data()})
		return nil
	}
	for _, t := range p.Tensors {
		if err := take(t, data); err != nil {
			return err
		}
	}
	for _, t := range p.BufferTensors {
		if t.Int64 {
			continue // a counter (num_batches_tracked): the run's own
		}
		if _, _, ok := find(t.Name); ok {
			if err := take(t, buffers); err != nil {
				return err
			}
		}
	}
	for _, t := range p.Ties {
		tv, name, ok := find(t.Name)
		if !ok {
			continue
		}
		used[name] = true
		of, _, _ := find(t.Of.Name)
		n := min(len(tv.Data()), len(of.Data()))
		if !slices.Equal(tv.Data()[:n], of.Data()[:n]) {
			return fmt.Errorf("tensor %q differs from %q: this model ties them (the head is the token embedding); untied weights cannot be loaded", name, t.Of.Name)
		}
	}
	for _, n := range slices.Sorted(slices.Values(st.Names())) {
		if !used[n] && !strings.HasPrefix(n, optimPrefix) && (ignore == nil || !ignore(n)) {
			return fmt.Errorf("tensor %q is not in this model: weights for another model or other --layers?", n)
		}
	}
	for _, j := range jobs { // every check passed
		clear(j.dst[copy(j.dst, floats(j.src)):]) // row-major: leading rows
	}
	return nil
}

// floats is b's little-endian float32s (copied, b may be unaligned).
func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(b)), b)
	return v
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
