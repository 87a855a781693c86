package data

import "math/rand/v2"

// Sampler decides which samples each rank trains on at each step.
//
// Each epoch draws one permutation of [0, N) from (Seed, epoch), the same
// on every rank. Rank r takes the permutation's elements r, r+Size,
// r+2*Size, ... (interleaved, like PyTorch's DistributedSampler), so at
// step s the ranks' batches together are exactly elements [s*G, (s+1)*G) of
// the permutation, G = Batch*Size: the batch one process with batch G
// would draw. The last N mod G samples of each epoch's permutation are
// dropped, so every rank runs the same StepsPerEpoch and no rank waits on
// a shorter one; a different permutation each epoch means no sample is
// always left out.
type Sampler struct {
	N, Batch, Rank, Size int
	Seed                 uint64
	Ordered              bool // the samples' own order every epoch, no permutation
}

// StepsPerEpoch is the number of steps every rank runs per epoch.
func (s Sampler) StepsPerEpoch() int { return s.N / (s.Batch * s.Size) }

// Epoch returns this rank's sample indices for epoch e, StepsPerEpoch x
// Batch of them; step k uses [k*Batch, (k+1)*Batch).
func (s Sampler) Epoch(e int) []int {
	var perm []int
	if s.Ordered {
		perm = make([]int, s.N)
		for i := range perm {
			perm[i] = i
		}
	} else {
		perm = Permutation(s.N, s.Seed, uint64(e))
	}
	mine := make([]int, s.StepsPerEpoch()*s.Batch)
	for i := range mine {
		mine[i] = perm[i*s.Size+s.Rank]
	}
	return mine
}

// Permutation returns a permutation of [0, n) determined by (seed, stream)
// alone: a Fisher-Yates shuffle driven by PCG, with the bounded draws
// written here so the sequence never changes under a new Go release.
func Permutation(n int, seed, stream uint64) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	rng := rand.NewPCG(seed, stream)
	for i := n - 1; i > 0; i-- {
		j := int(bounded(rng, uint64(i+1)))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// bounded draws uniformly from [0, n) by rejection (no modulo bias).
func bounded(rng *rand.PCG, n uint64) uint64 {
	limit := -n % n // 2^64 mod n
	for {
		v := rng.Uint64()
		if v >= limit {
			return v % n
		}
	}
}

// Shard returns rank's share of n evaluation samples: r, r+size, ... .
// Unlike training, nothing is dropped, so shards may differ in length by
// one and together cover every sample once.
func Shard(n, rank, size int) []int {
	var idx []int
	for i := rank; i < n; i += size {
		idx = append(idx, i)
	}
	return idx
}
