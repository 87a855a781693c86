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

// initializer is a layer with parameters to draw at the start.
type initializer interface {
	init(rng *rand.Rand)
}
