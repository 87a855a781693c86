// Package params is a model's flat parameter, gradient and buffer storage
// and the layout of its named tensors. It is its own package, apart from
// model's layers and their C kernels, so that what only reads and writes
// that layout (checkpoint, and checkpoint's fuzz build, which compiles
// every dependency again with coverage instrumentation) does not build
// the kernels: winograd.c alone is minutes of gcc. model re-exports these
// types under their old names (model.Params is params.Params).
package params

import (
	"fmt"
	"unsafe"
)

// Tensor is a named view into a Params buffer: elements [Offset,
// Offset+Size) of Data (and of Grad), or of Buffers, shaped Shape in
// row-major order.
type Tensor struct {
	Name   string
	Shape  []int
	Offset int
	Size   int  // in float32 slots
	Int64  bool // one int64 held in two float32 slots (a buffer only)
	// Copy marks a tensor this part holds although another part owns it:
	// the tied token embedding on the last pipeline stage. Checkpoints
	// save the owner's.
	Copy bool
	// Full is the whole tensor's shape when this part holds only a shard
	// of it (tensor parallelism), Split which; nil: the whole tensor.
	Full  []int
	Split Split
}

// Split says which shard of a tensor a tensor-parallel part holds: along
// dimension Dim, the tensor is Groups equal blocks (c_attn's q, k and v:
// 3), each cut into Parts equal slices, of which this part holds slice
// Part of every block.
type Split struct{ Dim, Groups, Part, Parts int }

// Spans lists where t's elements lie in the whole tensor: runs of n
// values, at off in the shard and at whole in the whole tensor (row-major
// offsets within the tensors). An unsplit tensor is one run.
func (t Tensor) Spans() (off, whole, n []int) {
	if t.Full == nil {
		return []int{0}, []int{0}, []int{t.Size}
	}
	s := t.Split
	full := t.Full
	inner := 1 // values per index of dimension Dim
	for _, d := range full[s.Dim+1:] {
		inner *= d
	}
	outer := 1
	for _, d := range full[:s.Dim] {
		outer *= d
	}
	block := full[s.Dim] / s.Groups // indices per group
	slice := block / s.Parts        // indices per shard of a group
	at := 0
	for o := range outer {
		for g := range s.Groups {
			off = append(off, at)
			whole = append(whole, (o*full[s.Dim]+g*block+s.Part*slice)*inner)
			n = append(n, slice*inner)
			at += slice * inner
		}
	}
	return off, whole, n
}

// AddSplit registers the shard split of a tensor whose whole shape is
// full, and returns its view (shape: the shard's).
func (p *Params) AddSplit(name string, split Split, full ...int) Tensor {
	if split.Parts <= 1 {
		return p.Add(name, full...)
	}
	shape := append([]int(nil), full...)
	shape[split.Dim] /= split.Parts
	t := p.Add(name, shape...)
	if t.Full != nil || p.replay >= 0 && p.alloced {
		return t // a replica's: registered already
	}
	t.Full, t.Split = full, split
	whole := 1
	for _, d := range full {
		whole *= d
	}
	p.total += whole - t.Size
	if !t.Absent() {
		p.Tensors[len(p.Tensors)-1] = t
	}
	p.added[len(p.added)-1] = t
	return t
}

// Absent reports that the tensor is on another part of a model-parallel
// grid (Offset is -1; Shape and Size are the whole tensor's).
func (t Tensor) Absent() bool { return t.Offset < 0 }

// Of returns the tensor's elements of buf (Params.Data, Params.Grad, or an
// optimizer state buffer of the same layout).
func (t Tensor) Of(buf []float32) []float32 { return buf[t.Offset : t.Offset+t.Size] }

// Params is a model's flat parameter and gradient storage and its layout.
// Tensors are laid out in the order layers are built (the forward order),
// so backward produces gradients from the end of the buffer to its start.
//
// Buffers is a third flat buffer for state that is saved but not trained
// (BatchNorm's running mean and variance, its batch counter), laid out by
// BufferTensors; PyTorch calls these buffers too.
type Params struct {
	Data          []float32
	Grad          []float32
	Tensors       []Tensor
	Buffers       []float32
	BufferTensors []Tensor
	// Ties are names under which a tensor is saved a second time, shared
	// rather than trained apart: GPT-2's lm_head.weight is
	// transformer.wte.weight, and PyTorch's state_dict lists both.
	Ties    []Tie
	n, nb   int
	alloced bool
	// held, when set, says whether the layer being built is on this
	// part: tensors of the others are registered Absent, without storage
	// (model's part.go, through HoldIf). Nil: the whole model.
	held func() bool
	// Every tensor and buffer as registered, held or not, in order:
	// what another part's model or a replica (Replay) walks through.
	added, addedBuf   []Tensor
	replay, replayBuf int // Replay's positions in added and addedBuf; -1 when not replaying
	total             int // parameters of the whole model (held or not, copies once)
}

// Add registers a tensor of the given shape and returns its view. It
// panics after Alloc.
func (p *Params) Add(name string, shape ...int) Tensor {
	if t, ok := p.replayed(&p.added, &p.replay, name); ok {
		return t
	}
	if p.alloced {
		panic("params: Params.Add after Alloc")
	}
	size := 1
	for _, d := range shape {
		size *= d
	}
	t := Tensor{Name: name, Shape: shape, Offset: -1, Size: size}
	p.total += size
	if p.held == nil || p.held() {
		t.Offset = p.n
		p.n += size
		p.Tensors = append(p.Tensors, t)
	}
	p.added = append(p.added, t)
	return t
}

// AddCopy registers this part's copy of a tensor another part owns
// (Tensor.Copy), whatever part is being built.
func (p *Params) AddCopy(name string, shape ...int) Tensor {
	if t, ok := p.replayed(&p.added, &p.replay, name); ok {
		return t
	}
	held := p.held
	p.held = nil
	t := p.Add(name, shape...)
	p.held = held
	t.Copy = true
	p.total -= t.Size
	p.Tensors[len(p.Tensors)-1] = t
	p.added[len(p.added)-1] = t
	return t
}

// Replay makes the next registrations return, in order, the tensors
// already registered, so that a second set of layers (a replica holding
// other activations: pipeline micro-batches in flight) shares this
// storage. EndReplay checks that they matched.
func (p *Params) Replay() { p.replay, p.replayBuf = 0, 0 }

// EndReplay ends Replay.
func (p *Params) EndReplay() {
	if p.replay != len(p.added) || p.replayBuf != len(p.addedBuf) {
		panic("params: a replica registered other tensors")
	}
	p.replay, p.replayBuf = -1, -1
}

func (p *Params) replayed(list *[]Tensor, at *int, name string) (Tensor, bool) {
	if !p.alloced || *at < 0 {
		return Tensor{}, false
	}
	if *at >= len(*list) || (*list)[*at].Name != name {
		panic("params: a replica registers " + name + " out of order")
	}
	t := (*list)[*at]
	*at++
	return t, true
}

// AddBuffer registers a float32 buffer tensor of the given shape.
func (p *Params) AddBuffer(name string, shape ...int) Tensor {
	if t, ok := p.replayed(&p.addedBuf, &p.replayBuf, name); ok {
		return t
	}
	if p.alloced {
		panic("params: Params.AddBuffer after Alloc")
	}
	size := 1
	for _, d := range shape {
		size *= d
	}
	t := Tensor{Name: name, Shape: shape, Offset: -1, Size: size}
	if p.held == nil || p.held() {
		t.Offset = p.nb
		p.nb += size
		p.BufferTensors = append(p.BufferTensors, t)
	}
	p.addedBuf = append(p.addedBuf, t)
	return t
}

// AddInt64Buffer registers a scalar int64 buffer (shape []), kept in two
// float32 slots of Buffers; read and write it with Int64.
func (p *Params) AddInt64Buffer(name string) Tensor {
	if t, ok := p.replayed(&p.addedBuf, &p.replayBuf, name); ok {
		return t
	}
	if p.held == nil || p.held() {
		p.nb += p.nb % 2 // 8-byte aligned
	}
	t := p.AddBuffer(name, 2)
	t.Shape, t.Int64 = []int{}, true
	if !t.Absent() {
		p.BufferTensors[len(p.BufferTensors)-1] = t
	}
	p.addedBuf[len(p.addedBuf)-1] = t
	return t
}

// Tie is Name, another name of the parameter tensor Of.
type Tie struct {
	Name string
	Of   Tensor
}

// Tie registers name as another name of t, for checkpoints.
func (p *Params) Tie(name string, t Tensor) {
	if !p.alloced { // a replica (Replay) ties nothing again
		p.Ties = append(p.Ties, Tie{name, t})
	}
}

// Int64 points at the int64 a scalar int64 buffer tensor holds.
func (p *Params) Int64(t Tensor) *int64 {
	if !t.Int64 {
		panic("params: Int64 of a float32 tensor")
	}
	return (*int64)(unsafe.Pointer(&p.Buffers[t.Offset]))
}

// Alloc allocates the flat buffers once every tensor is registered.
func (p *Params) Alloc() {
	p.alloced, p.held, p.replay, p.replayBuf = true, nil, -1, -1
	p.Data = hugeFloats(p.n)
	p.Grad = hugeFloats(p.n)
	// Room for int64s: float32 slots in an 8-byte-aligned backing.
	backing := make([]int64, (p.nb+1)/2)
	if p.nb > 0 {
		p.Buffers = unsafe.Slice((*float32)(unsafe.Pointer(&backing[0])), p.nb)
	}
}

// Len is the number of parameters held (on a model-parallel grid, this
// part's).
func (p *Params) Len() int { return p.n }

// Total is the number of parameters of the whole model, wherever they
// are held (a copy counted once).
func (p *Params) Total() int { return p.total }

// Registered lists every parameter tensor of the whole model in the order
// the layers registered them: this part's with their offsets, the others
// Absent.
func (p *Params) Registered() []Tensor { return p.added }

// HoldIf makes the tensors registered from now on (until Alloc) take
// storage only while held() is true; the others are registered Absent.
// model builds one part of a model-parallel grid this way, asking per
// layer.
func (p *Params) HoldIf(held func() bool) { p.held = held }

// Alloced reports whether Alloc has run: registrations after it are a
// replica's (Replay).
func (p *Params) Alloced() bool { return p.alloced }

// InitBuf is where an initialiser draws t's values: its own elements, or,
// for a tensor on another part, scratch of its size, so that every part
// draws the whole model's stream in the same order and keeps what np=1
// would have drawn for its own tensors.
func (p *Params) InitBuf(t Tensor, buf []float32, fill func([]float32)) {
	switch {
	case t.Absent() && t.Full == nil:
		fill(make([]float32, t.Size))
	case t.Full != nil:
		// A shard: the whole tensor drawn, this part's slices kept.
		n := 1
		for _, d := range t.Full {
			n *= d
		}
		whole := make([]float32, n)
		fill(whole)
		if t.Absent() {
			return
		}
		own := t.Of(buf)
		off, at, size := t.Spans()
		for i := range off {
			copy(own[off[i]:off[i]+size[i]], whole[at[i]:at[i]+size[i]])
		}
	default:
		fill(t.Of(buf))
	}
}

// Lookup returns the tensor called name.
func (p *Params) Lookup(name string) (Tensor, bool) {
	for _, t := range p.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// LookupBuffer returns the buffer tensor called name.
func (p *Params) LookupBuffer(name string) (Tensor, bool) {
	for _, t := range p.BufferTensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// String describes the layout, one tensor per line.
func (p *Params) String() string {
	s := ""
	for _, t := range p.Tensors {
		s += fmt.Sprintf("%-24s %v @%d\n", t.Name, t.Shape, t.Offset)
	}
	return s
}
