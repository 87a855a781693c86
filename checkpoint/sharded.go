package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"train/params"
)

// Sharded checkpoints (--checkpoint-format sharded): a directory
// step-NNNNNNNN/ in which every writer (a part of a model-parallel grid,
// or one rank) writes its own safetensors file, shard-KKKKK-of-NNNNN, of
// the tensors it holds, under the whole model's names, and rank 0 writes
// index.json last, atomically: a directory without an index is an
// unfinished checkpoint and is never read.
//
// The index is Hugging Face's model.safetensors.index.json extended to
// slices: a file may hold part of a tensor (a tensor-parallel shard's
// columns, and later a ZeRO shard's range of the flat buffer), so each
// tensor lists the files holding it and, for each, the runs of the whole
// tensor's elements (row-major offset and count) that the file's tensor
// of the same name holds one after another.
const ShardedFormat = "train.checkpoint.sharded/v1"

// IndexName is the index's file in a sharded checkpoint's directory.
const IndexName = "index.json"

// shardFormat marks a shard file (its own metadata: the format, the step,
// its checksum).
const shardFormat = "train.checkpoint.shard/v1"

// ShardedPath names the sharded checkpoint of a step.
func ShardedPath(dir string, step int) string {
	return filepath.Join(dir, fmt.Sprintf("step-%08d", step))
}

// ShardName is writer k of n's file in the directory.
func ShardName(k, n int) string { return fmt.Sprintf("shard-%05d-of-%05d.safetensors", k, n) }

// IsSharded reports whether path is a sharded checkpoint (a directory).
func IsSharded(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// Index is a sharded checkpoint's index.json.
type Index struct {
	Format   string                 `json:"format"`
	Metadata map[string]string      `json:"metadata"` // as a single file's: the run's position and how it was made
	Files    map[string]FileInfo    `json:"files"`
	Tensors  map[string]IndexTensor `json:"tensors"`
}

// FileInfo is what the index knows of a shard file, to name a missing or
// truncated one before reading it.
type FileInfo struct {
	Bytes int64 `json:"bytes"`
}

// IndexTensor is one whole tensor: its dtype and shape, and the slices of
// it the files hold.
type IndexTensor struct {
	DType  string  `json:"dtype"`
	Shape  []int   `json:"shape"`
	Slices []Slice `json:"slices"`
}

// Slice is the part of a tensor one file holds: runs of the whole
// tensor's elements, [offset, count], which the file's tensor of the same
// name holds in this order.
type Slice struct {
	File  string   `json:"file"`
	Spans [][2]int `json:"spans"`
}

// shardTensor is a tensor a part writes: every unsplit one only when
// replicated says this writer is the one that writes them (shard 0 of a
// tensor-parallel stage: the others hold the same values), a split one
// always, never the tied copy (its owner's is saved).
func shardTensor(t params.Tensor, replicated bool) bool {
	return !t.Copy && !t.Absent() && (t.Full != nil || replicated)
}

// WriteShard writes the tensors of part's layout that this writer saves
// (see shardTensor) from s's buffers to path, atomically, and returns the
// file's size.
func WriteShard(path string, part *params.Params, s *State, replicated bool) (FileInfo, error) {
	views := map[string]tensorView{}
	for _, t := range part.Tensors {
		if !shardTensor(t, replicated) {
			continue
		}
		views[t.Name] = viewOf(t, s.Params)
		for buf, v := range s.Optim {
			views[optimPrefix+buf+"."+t.Name] = viewOf(t, v)
		}
	}
	return writeShardViews(path, views, part, s, replicated)
}

// writeShardViews writes views, with part's buffers when buffers says
// this writer holds them, as a shard file at path, atomically, and
// returns its size.
func writeShardViews(path string, views map[string]tensorView, part *params.Params, s *State, buffers bool) (FileInfo, error) {
	if buffers {
		for _, t := range part.BufferTensors {
			views[t.Name] = viewOf(t, s.Buffers)
		}
	}
	meta := map[string]string{"format": shardFormat, "step": strconv.Itoa(s.Step)}
	if err := writeViews(path, views, meta, s.WrapFile); err != nil {
		return FileInfo{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return FileInfo{}, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return FileInfo{Bytes: fi.Size()}, nil
}

// Add records in x the slices the writer of file holds of part's layout
// (what WriteShard writes), with optim the optimizer's buffer names.
func (x *Index) Add(file string, part *params.Params, optim []string, replicated bool) {
	add := func(name, dtype string, shape []int, spans [][2]int) { x.addSlice(file, name, dtype, shape, spans) }
	for _, t := range part.Tensors {
		if !shardTensor(t, replicated) {
			continue
		}
		_, whole, n := t.Spans()
		spans := make([][2]int, len(whole))
		for i := range whole {
			spans[i] = [2]int{whole[i], n[i]}
		}
		shape := t.Shape
		if t.Full != nil {
			shape = t.Full
		}
		add(t.Name, "F32", shape, spans)
		for _, b := range optim {
			add(optimPrefix+b+"."+t.Name, "F32", shape, spans)
		}
	}
	if replicated {
		x.addBuffers(file, part)
	}
}

// addSlice records that file holds spans of the tensor name.
func (x *Index) addSlice(file, name, dtype string, shape []int, spans [][2]int) {
	if x.Tensors == nil {
		x.Tensors = map[string]IndexTensor{}
	}
	e := x.Tensors[name]
	e.DType, e.Shape = dtype, shape
	e.Slices = append(e.Slices, Slice{File: file, Spans: spans})
	x.Tensors[name] = e
}

// addBuffers records that file holds part's buffers whole.
func (x *Index) addBuffers(file string, part *params.Params) {
	for _, t := range part.BufferTensors {
		dtype, numel := "F32", t.Size
		if t.Int64 {
			dtype, numel = "I64", t.Size/2
		}
		x.addSlice(file, t.Name, dtype, t.Shape, [][2]int{{0, numel}})
	}
}

// WriteIndex writes x into the checkpoint directory dir last and
// atomically: the checkpoint exists from the rename on.
func WriteIndex(dir string, x *Index) error {
	x.Format = ShardedFormat
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, IndexName), func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return err
	}
	// The checkpoint's directory entry too, so the new step survives a
	// crash with its index.
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	return nil
}

// ReadIndex reads a sharded checkpoint's index and checks its format.
func ReadIndex(dir string) (*Index, error) {
	b, err := os.ReadFile(filepath.Join(dir, IndexName))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	var x Index
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %s is not an index: %v", dir, IndexName, err)
	}
	if x.Format != ShardedFormat {
		return nil, fmt.Errorf("checkpoint %s: format %q, this train reads %q", dir, x.Format, ShardedFormat)
	}
	return &x, nil
}

// Position reads the run's position from the index's metadata into s
// (its Step, Epoch, StepInEpoch, Samples and Meta).
func (x *Index) Position(s *State) error {
	meta := x.Metadata
	pos, err := position(meta, "the index")
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(meta["samples"], 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("bad samples %q in the index", meta["samples"])
	}
	s.Step, s.Epoch, s.StepInEpoch, s.Samples, s.Meta = pos[0], pos[1], pos[2], n, meta
	return nil
}

// LoadShards fills the tensors part's layout holds (its split slices,
// its whole tensors, the tied copy, the optimizer's state of s.Optim and
// the buffers) from the sharded checkpoint dir, reading only the shard
// files that hold them, each checked against its size in the index and
// its own checksum, streamed a few MiB at a time (no file is held in
// memory, so a part that fills its memory can still be loaded). s's
// position and metadata come from the index. What this part needs is
// checked against the index before any byte is copied; a file whose
// checksum fails is found only once its runs are copied, so a failed load
// leaves the buffers partly overwritten: the caller loads another
// checkpoint whole or stops.
func LoadShards(dir string, part *params.Params, s *State) error {
	if err := loadShards(dir, part, s); err != nil {
		return fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	return nil
}

// A copy is a run of one tensor's bytes in a shard file going into the
// part's buffers: at from in the file's tensor, into to.
type copyRun struct {
	from int
	to   []byte
}

// A dest is where a tensor's runs go: into data at off[i] (elements),
// from the whole tensor's element at[i], n[i] of them.
type dest struct {
	key       string
	data      []byte
	off, at   []int
	n         []int
	elem      int // bytes per element
	wholeSize []int
}

func loadShards(dir string, part *params.Params, s *State) error {
	x, err := ReadIndex(dir)
	if err != nil {
		return err
	}
	var dests []dest
	for _, t := range part.Tensors {
		if t.Absent() {
			continue
		}
		off, at, n := t.Spans()
		shape := t.Shape
		if t.Full != nil {
			shape = t.Full
		}
		dests = append(dests, dest{key: t.Name, data: Bytes(t.Of(s.Params)), off: off, at: at, n: n, elem: 4, wholeSize: shape})
		for _, b := range slices.Sorted(maps.Keys(s.Optim)) {
			dests = append(dests, dest{key: optimPrefix + b + "." + t.Name, data: Bytes(t.Of(s.Optim[b])), off: off, at: at, n: n, elem: 4, wholeSize: shape})
		}
	}
	return loadDests(dir, x, append(dests, bufferDests(part, s)...), s)
}

// bufferDests are the whole buffers of part (BatchNorm's statistics).
func bufferDests(part *params.Params, s *State) []dest {
	var dests []dest
	for _, t := range part.BufferTensors {
		elem, numel := 4, t.Size
		if t.Int64 {
			elem, numel = 8, t.Size/2
		}
		dests = append(dests, dest{key: t.Name, data: Bytes(t.Of(s.Buffers)), off: []int{0}, at: []int{0}, n: []int{numel}, elem: elem, wholeSize: t.Shape})
	}
	return dests
}

// loadDests copies into dests what the index x of dir places in its
// shards, and s's position from the index.
func loadDests(dir string, x *Index, dests []dest, s *State) error {
	// Plan every copy from the index alone, checking that the shards
	// cover what this part needs: file -> tensor -> runs.
	plan := map[string]map[string][]copyRun{}
	want := map[string]map[string]int{} // file -> tensor -> bytes the index says it holds
	for _, d := range dests {
		e, ok := x.Tensors[d.key]
		if !ok {
			return fmt.Errorf("tensor %q is not in the checkpoint (written by another --model or optimizer?)", d.key)
		}
		if !slices.Equal(e.Shape, d.wholeSize) {
			return fmt.Errorf("tensor %q is %v in the checkpoint, this model has %v", d.key, e.Shape, d.wholeSize)
		}
		covered := 0
		for _, sl := range e.Slices {
			if _, ok := x.Files[sl.File]; !ok {
				return fmt.Errorf("the index places %q in %s but does not list that file", d.key, sl.File)
			}
			pos := 0 // elements into the file's tensor
			for _, sp := range sl.Spans {
				for r := range d.at {
					lo, hi := max(sp[0], d.at[r]), min(sp[0]+sp[1], d.at[r]+d.n[r])
					if lo >= hi {
						continue
					}
					to := (d.off[r] + lo - d.at[r]) * d.elem
					if plan[sl.File] == nil {
						plan[sl.File], want[sl.File] = map[string][]copyRun{}, map[string]int{}
					}
					plan[sl.File][d.key] = append(plan[sl.File][d.key], copyRun{from: (pos + lo - sp[0]) * d.elem, to: d.data[to : to+(hi-lo)*d.elem]})
					covered += hi - lo
				}
				pos += sp[1]
			}
			if plan[sl.File] != nil {
				want[sl.File][d.key] = pos * d.elem
			}
		}
		need := 0
		for _, k := range d.n {
			need += k
		}
		if covered != need {
			return fmt.Errorf("tensor %q: the shards hold %d of the %d values this part needs", d.key, covered, need)
		}
	}
	if err := x.Position(s); err != nil {
		return err
	}
	// Read each file once, front to back in the checksum's order, a chunk
	// at a time: every byte is checked, and only the runs this part needs
	// are kept.
	chunk := make([]byte, 4<<20)
	for _, name := range slices.Sorted(maps.Keys(plan)) {
		if err := readShard(filepath.Join(dir, name), x.Files[name].Bytes, plan[name], want[name], chunk); err != nil {
			return err
		}
	}
	return nil
}

// readShard streams the shard file at path (size bytes, says the index)
// through its checksum, copying the planned runs out of its tensors as
// they pass.
func readShard(path string, size int64, plan map[string][]copyRun, want map[string]int, chunk []byte) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s is missing", path)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != size {
		return fmt.Errorf("%s is %d bytes, the index says %d: truncated or replaced", path, fi.Size(), size)
	}
	h, err := readHeader(f, size)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if h.meta["format"] != shardFormat {
		return fmt.Errorf("%s: format %q, want %q", path, h.meta["format"], shardFormat)
	}
	for key, n := range want {
		t, ok := h.tensors[key]
		if !ok {
			return fmt.Errorf("%s lacks tensor %q, which the index places there", path, key)
		}
		if t.end-t.start != int64(n) {
			return fmt.Errorf("%s: tensor %q holds %d bytes, the index says %d", path, key, t.end-t.start, n)
		}
	}
	var crc uint32
	for _, name := range slices.Sorted(maps.Keys(h.tensors)) {
		t := h.tensors[name]
		runs := plan[name]
		for at := t.start; at < t.end; {
			n := min(int64(len(chunk)), t.end-at)
			b := chunk[:n]
			if _, err := f.ReadAt(b, h.data+at); err != nil {
				return fmt.Errorf("%s: %v", path, err)
			}
			crc = crc32.Update(crc, castagnoli, b)
			c0, c1 := int(at-t.start), int(at-t.start+n)
			for _, r := range runs {
				lo, hi := max(r.from, c0), min(r.from+len(r.to), c1)
				if lo < hi {
					copy(r.to[lo-r.from:hi-r.from], b[lo-c0:hi-c0])
				}
			}
			at += n
		}
	}
	if w, err := strconv.ParseUint(h.meta["crc32c"], 16, 32); err != nil || uint32(w) != crc {
		return fmt.Errorf("%s: checksum mismatch (file says %s, data gives %08x): the file is corrupt", path, h.meta["crc32c"], crc)
	}
	return nil
}

// header is a safetensors file's header: its tensors' byte ranges (from
// the start of the data) and its metadata.
type header struct {
	data    int64 // where the data starts in the file
	tensors map[string]struct{ start, end int64 }
	meta    map[string]string
}

// readHeader reads a safetensors header from f (size bytes) without
// reading the data: 8 bytes of little-endian length, then that much JSON.
func readHeader(f *os.File, size int64) (*header, error) {
	var nb [8]byte
	if _, err := f.ReadAt(nb[:], 0); err != nil {
		return nil, fmt.Errorf("not a safetensors file: %v", err)
	}
	n := int64(binary.LittleEndian.Uint64(nb[:]))
	if n <= 0 || n > 100<<20 || 8+n > size {
		return nil, fmt.Errorf("not a safetensors file: header of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 8); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a safetensors header: %v", err)
	}
	h := &header{data: 8 + n, tensors: map[string]struct{ start, end int64 }{}}
	end := int64(0)
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &h.meta); err != nil {
				return nil, fmt.Errorf("bad __metadata__: %v", err)
			}
			continue
		}
		var t struct {
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &t); err != nil || t.Offsets[0] < 0 || t.Offsets[1] < t.Offsets[0] {
			return nil, fmt.Errorf("bad tensor %q in the header", name)
		}
		h.tensors[name] = struct{ start, end int64 }{t.Offsets[0], t.Offsets[1]}
		end = max(end, t.Offsets[1])
	}
	if h.data+end != size {
		return nil, fmt.Errorf("the header describes %d bytes of data, the file has %d", end, size-h.data)
	}
	return h, nil
}
