package model

import "math/rand/v2"

// Layer is one stage of a network over flat row-major batches.
type Layer interface {
	// InSize and OutSize are the values per sample the layer takes and
	// gives.
	InSize() int
	OutSize() int
	// Forward computes y (n, OutSize) from x (n, InSize).
	Forward(y, x []float32, n int)
	// Backward adds the gradients of the layer's parameters to the
	// gradient buffer and, unless dx is nil, writes dx (n, InSize) from dy
	// (n, OutSize). x and y are the Forward call's input and output.
	Backward(dx, dy, x, y []float32, n int)
}

// initializer is a layer with parameters (or buffers) to set at the start.
type initializer interface {
	init(rng *rand.Rand)
}

// Mode is what layers need to know of the pass that runs them; the model
// shares one with all its layers.
type Mode struct {
	// Training selects batch statistics in BatchNorm (and updates the
	// running ones); false is evaluation.
	Training bool
	// Reduce, when set, sums small float64 vectors across the data-parallel
	// replicas in place: synchronised BatchNorm. Nil: each replica alone.
	Reduce func([]float64)
	// TensorReduce sums a float32 buffer over the tensor-parallel shards
	// of a layer, in place (Conv1D split by rows in forward, by columns in
	// backward). Only a split model calls it.
	TensorReduce func([]float32)
	// scratch is the blocks' shared working memory (scratch.go).
	scratch scratch
}

// flopCounter is a layer that reports its matrix-multiply work per sample:
// forward, the weight gradient, and the input gradient.
type flopCounter interface {
	flops() (fwd, dw, dx int64)
}
