package checkpoint

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nlpodyssey/safetensors"

	"train/model"
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
// a == b when none.
func cut(t model.Tensor, lo, hi int) (a, b int) {
	a, b = max(t.Offset, lo), min(t.Offset+t.Size, hi)
	if a >= b {
		return 0, 0
	}
	return a, b
}

// WriteRange writes the parameters [lo, hi) of p's layout from s.Params
// (full length), the optimizer's state for them from s.Optim (each
// hi-lo long: the shard's own buffers), and with buffers the model's
// buffers, to path atomically.
func WriteRange(path string, p *model.Params, s *State, lo, hi int, buffers bool) (FileInfo, error) {
	views := map[string]tensorView{}
	for _, t := range p.Tensors {
		a, b := cut(t, lo, hi)
		if a == b {
			continue
		}
		views[t.Name] = tensorView{dtype: safetensors.F32, data: s.Params[a:b], shape: []int{b - a}}
		for buf, v := range s.Optim {
			views[optimPrefix+buf+"."+t.Name] = tensorView{dtype: safetensors.F32, data: v[a-lo : b-lo], shape: []int{b - a}}
		}
	}
	return writeShardViews(path, views, p, s, buffers)
}

// AddRange records in x what WriteRange wrote to file.
func (x *Index) AddRange(file string, p *model.Params, optim []string, lo, hi int, buffers bool) {
	for _, t := range p.Tensors {
		a, b := cut(t, lo, hi)
		if a == b {
			continue
		}
		spans := [][2]int{{a - t.Offset, b - a}}
		x.addSlice(file, t.Name, "F32", t.Shape, spans)
		for _, buf := range optim {
			x.addSlice(file, optimPrefix+buf+"."+t.Name, "F32", t.Shape, spans)
		}
	}
	if buffers {
		x.addBuffers(file, p)
	}
}

// LoadRange reads from the sharded checkpoint dir (written by any layout)
// the parameters [lo, hi) of p's layout into s.Params (full length; the
// rest untouched), the optimizer's state for them into s.Optim (each
// hi-lo long), the model's buffers whole, and the position, checked as
// LoadShards checks.
func LoadRange(dir string, p *model.Params, s *State, lo, hi int) error {
	x, err := ReadIndex(dir)
	if err != nil {
		return err
	}
	var dests []dest
	for _, t := range p.Tensors {
		a, b := cut(t, lo, hi)
		if a == b {
			continue
		}
		run := func(key string, buf []float32, off int) dest {
			return dest{key: key, data: Bytes(buf), off: []int{off}, at: []int{a - t.Offset}, n: []int{b - a}, elem: 4, wholeSize: t.Shape}
		}
		dests = append(dests, run(t.Name, s.Params, a))
		for _, buf := range slices.Sorted(maps.Keys(s.Optim)) {
			dests = append(dests, run(optimPrefix+buf+"."+t.Name, s.Optim[buf], a-lo))
		}
	}
	if err := loadDests(dir, x, append(dests, bufferDests(p, s)...), s); err != nil {
		return fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	return nil
}
