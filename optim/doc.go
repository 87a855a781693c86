// Package optim updates flat parameter buffers from flat gradient buffers.
//
// An optimizer's state (SGD's momentum) is a flat buffer of the same
// layout as the parameters, so it is one loop over the whole model, and a
// checkpoint stores it tensor by tensor under the parameters' names.
//
// This package knows nothing of models or MPI.
package optim
