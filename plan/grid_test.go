package plan

import (
	"testing"
)

// toy is four equal layers (cost 1, 1 MB of parameters, 1000 bytes out
// per sample, held 3000 bytes per sample), two of them tensor-parallel
// with 100 bytes per allreduce per sample; one step of batch 8 takes 1 s
// on one rank. Its even cuts are by hand.
func toy() GridModel {
	m := GridModel{Heads: 2, Batch: 8, ComputeS: 1, StateCopies: 1,
		Balance: func(p int) ([]int, error) { return map[int][]int{1: {0}, 2: {0, 2}, 4: {0, 1, 2, 3}}[p], nil }}
	for i := range 4 {
		l := GridLayer{Cost: 1, ParamBytes: 1e6, OutBytes: 1000, HeldBytes: 3000}
		if i == 1 || i == 2 {
			l.Tensor, l.TensorBytes, l.HeldBytes, l.HeldSplitBytes = true, 100, 1000, 2000
		}
		m.Layers = append(m.Layers, l)
	}
	return m
}

// TestGrids checks each grid of 2 ranks on one node against the stated
// model, worked by hand.
func TestGrids(t *testing.T) {
	net := Network{LatencyS: 1e-5, BytesPerS: 1e9, ReduceBytesS: 1e10, IntraBytesS: 2e9}
	intra := net
	intra.BytesPerS = 2e9
	grids, err := Grids(toy(), Cluster{Nodes: 1, RanksPerNode: 2, Net: net})
	if err != nil {
		t.Fatal(err)
	}
	byShape := map[[3]int]GridPlan{}
	for _, g := range grids {
		byShape[[3]int{g.D, g.P, g.T}] = g
	}
	if len(byShape) != 3 {
		t.Fatalf("grids %v, want (2,1,1), (1,2,1) and (1,1,2)", byShape)
	}
	// (1,2,1): M = 8 (the largest divisor: the bubble shrinks faster
	// than 2(P-1) hops grow); each stage is half the work, so the path is
	// (M+P-1) = 9 micro-batches of 0.5/8 s; the fill and drain are one hop
	// each way of 1000 bytes (one sample), inside the node.
	g := byShape[[3]int{1, 2, 1}]
	check := func(what string, got, want float64) {
		t.Helper()
		if !approx(got, want) {
			t.Errorf("%s = %g, want %g", what, got, want)
		}
	}
	if g.M != 8 {
		t.Errorf("(1,2,1): M = %d, want 8", g.M)
	}
	check("(1,2,1) bubble", g.Bubble, 1.0/9)
	check("(1,2,1) compute", g.ComputeS, 9*0.5/8)
	check("(1,2,1) pipe", g.PipeS, 2*(1e-5+1000/2e9))
	check("(1,2,1) step", g.StepS, 9*0.5/8+2*(1e-5+1000/2e9))
	check("(1,2,1) traffic", g.PipeBytes, 2*1000*8)
	// Memory, stage 0 (2 MB of parameters, x 3 with gradients and one
	// state copy; 1F1B holds 2 micro-batches of 1 sample, each held by
	// layer 0 (3000 bytes) and layer 1 (1000 + 2000 at T = 1)): 6e6 +
	// 2 x 6000.
	check("(1,2,1) memory", g.MemBytes, 6e6+2*6000)
	// (1,1,2): the two tensor layers halve; each of them costs 4 ring
	// allreduces on 2 ranks of 100 bytes x the micro-batch per
	// micro-batch. With no memory limit every M gives the same compute
	// and more allreduce latency, so M = 1: 8 samples per allreduce.
	g = byShape[[3]int{1, 1, 2}]
	ring := 2*1e-5 + 800/2e9 + 0.5*800/1e10 // 2(p-1) alpha + 2(p-1)/p n/B + (p-1)/p n/R, p = 2
	if g.M != 1 {
		t.Errorf("(1,1,2): M = %d, want 1", g.M)
	}
	check("(1,1,2) compute", g.ComputeS, 3.0/4)
	check("(1,1,2) tensor", g.TensorS, 2*4*ring)
	if g.TensorCalls != 8 {
		t.Errorf("(1,1,2): %d tensor allreduces, want 8", g.TensorCalls)
	}
	// (2,1,1): the whole step, then a 4 MB gradient allreduce on 2 ranks
	// of one node; the best of ring and mpi is at most the ring's.
	g = byShape[[3]int{2, 1, 1}]
	check("(2,1,1) compute", g.ComputeS, 1)
	if r := Ring(net, 2, 4e6); g.DataS <= 0 || g.DataS > r*(1+1e-9) {
		t.Errorf("(2,1,1) allreduce %g s by %s, want positive and at most the ring's %g", g.DataS, g.Allreduce, r)
	}
	check("(2,1,1) samples/s", g.SamplesS, 16/g.StepS)
	// Ranked by samples/s: the two replicas' 16 samples per ~1 s first.
	if grids[0].D != 2 {
		t.Errorf("first grid %+v, want (2,1,1)", grids[0])
	}
	// A budget of 9 MB fits only the split grids (the whole model's 4 MB
	// x 3 does not): they rank first.
	grids, _ = Grids(toy(), Cluster{Nodes: 1, RanksPerNode: 2, Net: net, MemBytes: 9e6})
	if grids[0].D != 1 || !grids[0].Fits || grids[len(grids)-1].Fits {
		t.Errorf("with 9 MB per rank: %+v first, %+v last; want a split grid first, the replicas last", grids[0], grids[len(grids)-1])
	}
}
