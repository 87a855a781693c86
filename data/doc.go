// Package data reads training data and decides which rank sees which
// sample when.
//
// Datasets live in memory as uint8 pixels (N x C x H x W) and labels, and
// are turned into normalised float32 batches on demand, so a rank holds one
// byte per pixel, not four. Readers validate everything a file claims
// (magic, dimensions, counts, label values) against what the file holds,
// and report problems as errors naming the file; they never allocate more
// than the file actually contains.
//
// Sampler gives every rank the same permutation of the training set per
// epoch (from the seed and the epoch number alone, so a resumed run draws
// the same one) and a disjoint, interleaved shard of it: at each step the
// union of the ranks' batches is exactly the global batch a single process
// with batch size x ranks would draw. That makes np=N and np=1 runs
// comparable step for step.
//
// This package knows nothing of MPI.
package data
