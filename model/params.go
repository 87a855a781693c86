package model

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
}

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
}

// Add registers a tensor of the given shape and returns its view. It
// panics after Alloc.
func (p *Params) Add(name string, shape ...int) Tensor {
	if p.alloced {
		panic("model: Params.Add after Alloc")
	}
	size := 1
	for _, d := range shape {
		size *= d
	}
	t := Tensor{Name: name, Shape: shape, Offset: p.n, Size: size}
	p.n += size
	p.Tensors = append(p.Tensors, t)
	return t
}

// AddBuffer registers a float32 buffer tensor of the given shape.
func (p *Params) AddBuffer(name string, shape ...int) Tensor {
	if p.alloced {
		panic("model: Params.AddBuffer after Alloc")
	}
	size := 1
	for _, d := range shape {
		size *= d
	}
	t := Tensor{Name: name, Shape: shape, Offset: p.nb, Size: size}
	p.nb += size
	p.BufferTensors = append(p.BufferTensors, t)
	return t
}

// AddInt64Buffer registers a scalar int64 buffer (shape []), kept in two
// float32 slots of Buffers; read and write it with Int64.
func (p *Params) AddInt64Buffer(name string) Tensor {
	p.nb += p.nb % 2 // 8-byte aligned
	t := p.AddBuffer(name, 2)
	t.Shape, t.Int64 = []int{}, true
	p.BufferTensors[len(p.BufferTensors)-1] = t
	return t
}

// Tie is Name, another name of the parameter tensor Of.
type Tie struct {
	Name string
	Of   Tensor
}

// Tie registers name as another name of t, for checkpoints.
func (p *Params) Tie(name string, t Tensor) { p.Ties = append(p.Ties, Tie{name, t}) }

// Int64 points at the int64 a scalar int64 buffer tensor holds.
func (p *Params) Int64(t Tensor) *int64 {
	if !t.Int64 {
		panic("model: Int64 of a float32 tensor")
	}
	return (*int64)(unsafe.Pointer(&p.Buffers[t.Offset]))
}

// Alloc allocates the flat buffers once every tensor is registered.
func (p *Params) Alloc() {
	p.alloced = true
	p.Data = make([]float32, p.n)
	p.Grad = make([]float32, p.n)
	// Room for int64s: float32 slots in an 8-byte-aligned backing.
	backing := make([]int64, (p.nb+1)/2)
	if p.nb > 0 {
		p.Buffers = unsafe.Slice((*float32)(unsafe.Pointer(&backing[0])), p.nb)
	}
}

// Len is the number of parameters.
func (p *Params) Len() int { return p.n }

// Lookup returns the tensor called name.
func (p *Params) Lookup(name string) (Tensor, bool) {
	for _, t := range p.Tensors {
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
