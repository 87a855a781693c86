// Package trainer runs data-parallel training on a world of MPI ranks: the
// loop, gradient averaging, evaluation, checkpoints and fault injection.
//
// Every rank runs the same loop on its own shard of each global batch
// (data.Sampler), averages gradients with an allreduce over the flat
// gradient buffer, and applies the same optimizer step to the same
// parameters, so replicas stay identical without ever sending parameters
// after the start. Rank 0 starts everyone from its parameters (fresh or
// from a checkpoint) by broadcast, logs, and alone writes checkpoints.
//
// Errors that every rank might meet during setup (bad flags, missing data,
// unwritable checkpoint directory, corrupt checkpoint) are agreed on with
// one allreduce, so the job ends cleanly with one message from the lowest
// failing rank; a failure during training returns an error on the failing
// rank only, and main aborts the job.
//
// The package is named trainer, not train as the design sketch has it: the
// binary built at the repository root is ./train and a directory of that
// name would take its place.
package trainer
