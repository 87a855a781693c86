package model

import "fmt"

// Tensor is a named view into a Params buffer: elements [Offset,
// Offset+Size) of Data (and of Grad), shaped Shape in row-major order.
type Tensor struct {
	Name   string
	Shape  []int
	Offset int
	Size   int
}

// Of returns the tensor's elements of buf (Params.Data, Params.Grad, or an
// optimizer state buffer of the same layout).
func (t Tensor) Of(buf []float32) []float32 { return buf[t.Offset : t.Offset+t.Size] }

// Params is a model's flat parameter and gradient storage and its layout.
// Tensors are laid out in the order layers are built (the forward order),
// so backward produces gradients from the end of the buffer to its start.
type Params struct {
	Data    []float32
	Grad    []float32
	Tensors []Tensor
	n       int
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

// Alloc allocates the flat buffers once every tensor is registered.
func (p *Params) Alloc() {
	p.alloced = true
	p.Data = make([]float32, p.n)
	p.Grad = make([]float32, p.n)
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
