package data

import (
	"slices"
	"testing"
)

func TestPermutation(t *testing.T) {
	p := Permutation(1000, 7, 3)
	s := slices.Clone(p)
	slices.Sort(s)
	for i, v := range s {
		if v != i {
			t.Fatalf("not a permutation: sorted[%d] = %d", i, v)
		}
	}
	if !slices.Equal(p, Permutation(1000, 7, 3)) {
		t.Error("same seed and stream gave another permutation")
	}
	if slices.Equal(p, Permutation(1000, 7, 4)) || slices.Equal(p, Permutation(1000, 8, 3)) {
		t.Error("another epoch or seed gave the same permutation")
	}
	// Pinned: a Go release must not change which samples a seed draws.
	if got := Permutation(10, 42, 0); !slices.Equal(got, pinnedPerm) {
		t.Errorf("Permutation(10, 42, 0) = %v, was %v", got, pinnedPerm)
	}
}

var pinnedPerm = []int{8, 6, 1, 0, 5, 9, 2, 7, 4, 3}

// TestSamplerUnion checks the property that makes np=N equal np=1: at every
// step, the union of the ranks' batches is the single process's batch of
// Batch x Size samples, and ranks never share a sample.
func TestSamplerUnion(t *testing.T) {
	const n, b = 1003, 8
	for _, size := range []int{1, 2, 3, 5} {
		one := Sampler{N: n, Batch: b * size, Rank: 0, Size: 1, Seed: 9}
		all := one.Epoch(2)
		var ranks [][]int
		for r := range size {
			s := Sampler{N: n, Batch: b, Rank: r, Size: size, Seed: 9}
			if s.StepsPerEpoch() != one.StepsPerEpoch() {
				t.Fatalf("size %d: %d steps, single process %d", size, s.StepsPerEpoch(), one.StepsPerEpoch())
			}
			ranks = append(ranks, s.Epoch(2))
		}
		if want := n / (b * size); one.StepsPerEpoch() != want {
			t.Fatalf("steps %d, want %d", one.StepsPerEpoch(), want)
		}
		for step := range one.StepsPerEpoch() {
			var union []int
			for _, idx := range ranks {
				union = append(union, idx[step*b:(step+1)*b]...)
			}
			global := slices.Clone(all[step*b*size : (step+1)*b*size])
			slices.Sort(union)
			slices.Sort(global)
			if !slices.Equal(union, global) {
				t.Fatalf("size %d step %d: ranks' union differs from the global batch", size, step)
			}
			if len(slices.Compact(union)) != len(global) {
				t.Fatalf("size %d step %d: ranks share a sample", size, step)
			}
		}
	}
}

func TestShard(t *testing.T) {
	seen := make([]int, 10)
	for r := range 3 {
		for _, i := range Shard(10, r, 3) {
			seen[i]++
		}
	}
	for i, c := range seen {
		if c != 1 {
			t.Errorf("sample %d in %d shards", i, c)
		}
	}
}
