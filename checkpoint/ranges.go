package checkpoint

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nlpodyssey/safetensors"

	"train/params"
)

// ZeRO's shards in a sharded checkpoint: rank r writes the range
// [lo, hi) of the flat buffers it owns, which cuts tensors anywhere, so
// each tensor the range touches is written as the run of its elements
// inside it (a 1-D tensor under the whole tensor's name), its parameters
// and every optimizer buffer alike, and the index says which run of the
// whole tensor each file holds. Any other layout (another np, another
// --zero stage, a grid, one rank) reads them back by element ranges
// (LoadShards, LoadRange).

// cut is the part of tensor t inside [lo, hi): flat offsets [a, b), or
// a == b when none (or t is absent from the part).
func cut(t params.Tensor, lo, hi int) (a, b int) {
	if t.Absent() {
		return 0, 0
	}
	a, b = max(t.Offset, lo), min(t.Offset+t.Size, hi)
	if a >= b {
		return 0, 0
	}
	return a, b
}

// runs is the part of tensor t inside the flat range [lo, hi) as runs of
// the whole tensor: n[i] elements at flat offset off[i] of the part's
// buffer are the whole tensor's from element at[i] (one run for a tensor
// held whole; a tensor-parallel shard's slices are several).
func runs(t params.Tensor, lo, hi int) (off, at, n []int) {
	o, w, k := t.Spans()
	for i := range o {
		a, b := max(t.Offset+o[i], lo), min(t.Offset+o[i]+k[i], hi)
		if a < b {
			off = append(off, a)
			at = append(at, w[i]+a-t.Offset-o[i])
			n = append(n, b-a)
		}
	}
	return off, at, n
}

// wholeShape is the shape of the whole tensor t is (a part of).
func wholeShape(t params.Tensor) []int {
	if t.Full != nil {
		return t.Full
	}
	return t.Shape
}

// WriteRange writes the parameters [lo, hi) of part's layout from
// s.Params (full length), the optimizer's state for them from s.Optim
// (each hi-lo long: the shard's own buffers), and with buffers the
// model's buffers, to path atomically. As WriteShard, it skips the tied
// copy, and the tensors held whole on every tensor-parallel shard unless
// replicated.
func WriteRange(path string, part *params.Params, s *State, lo, hi int, replicated, buffers bool) (FileInfo, error) {
	views := map[string]tensorView{}
	for _, t := range part.Tensors {
		a, b := cut(t, lo, hi)
		if a == b || !shardTensor(t, replicated) {
			continue
		}
		views[t.Name] = tensorView{dtype: safetensors.F32, data: s.Params[a:b], shape: []int{b - a}}
		for buf, v := range s.Optim {
			views[optimPrefix+buf+"."+t.Name] = tensorView{dtype: safetensors.F32, data: v[a-lo : b-lo], shape: []int{b - a}}
		}
	}
	return writeShardViews(path, views, part, s, buffers)
}

// AddRange records in x what WriteRange wrote to file.
func (x *Index) AddRange(file string, part *params.Params, optim []string, lo, hi int, replicated, buffers bool) {
	for _, t := range part.Tensors {
		if a, b := cut(t, lo, hi); a == b || !shardTensor(t, replicated) {
			continue
		}
		_, at, n := runs(t, lo, hi)
		spans := make([][2]int, len(at))
		for i := range at {
			spans[i] = [2]int{at[i], n[i]}
		}
		x.addSlice(file, t.Name, "F32", wholeShape(t), spans)
		for _, buf := range optim {
			x.addSlice(file, optimPrefix+buf+"."+t.Name, "F32", wholeShape(t), spans)
		}
	}
	if buffers {
		x.addBuffers(file, part)
	}
}

// LoadRange reads from the sharded checkpoint dir (written by any layout)
// the parameters [lo, hi) of part's layout into s.Params (full length;
// the rest untouched), the optimizer's state for them into s.Optim (each
// hi-lo long), the model's buffers whole, and the position, checked as
// LoadShards checks.
func LoadRange(dir string, part *params.Params, s *State, lo, hi int) error {
	x, err := ReadIndex(dir)
	if err != nil {
		return err
	}
	var dests []dest
	for _, t := range part.Tensors {
		off, at, n := runs(t, lo, hi)
		if t.Absent() || len(off) == 0 {
			continue
		}
		run := func(key string, buf []float32, base int) dest {
			o := make([]int, len(off))
			for i := range off {
				o[i] = off[i] - base
			}
			return dest{key: key, data: Bytes(buf), off: o, at: at, n: n, elem: 4, wholeSize: wholeShape(t)}
		}
		dests = append(dests, run(t.Name, s.Params, 0))
		for _, buf := range slices.Sorted(maps.Keys(s.Optim)) {
			dests = append(dests, run(optimPrefix+buf+"."+t.Name, s.Optim[buf], lo))
		}
	}
	if err := loadDests(dir, x, append(dests, bufferDests(part, s)...), s); err != nil {
		return fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	return nil
}
