// Package model holds the networks: their parameters, layers and loss.
//
// All parameters of a model live in one flat []float32 (Params.Data) and
// all gradients in a second one at the same offsets (Params.Grad); a named
// tensor is an offset, a length and a shape into them, named and shaped
// like the equivalent torch.nn module's state_dict entry (a Linear weight
// is [out, in]). So the optimizer is one loop, the gradient allreduce one
// call on one buffer (or on contiguous slices of it), and a checkpoint
// loads into PyTorch with load_state_dict.
//
// Layers are explicit Forward/Backward pairs over row-major batches; a
// Backward adds into the gradient buffer (the trainer zeroes it once per
// step) and writes the gradient of its input. Shapes are in the doc
// comments: (n, in) means n samples of in values each.
//
// Matrix products go through sgemm (gemm.go), the one place that picks the
// BLAS implementation.
//
// This package knows nothing of MPI.
package model
