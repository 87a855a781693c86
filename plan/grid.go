package plan

import (
	"fmt"
	"math"
	"sort"
)

// GridModel is a network to be placed on a D x P x T grid (train plan
// --grid): its layers in order, and one replica's step.
type GridModel struct {
	Layers []GridLayer
	// Heads is what tensor parallelism splits (T must divide it); 0: the
	// model has no tensor-parallel layers.
	Heads int
	// Batch is the samples per data-parallel replica per step; ComputeS
	// one step of it on one rank, whole model (forward, backward, update).
	Batch    int
	ComputeS float64
	// StateCopies is the optimizer's state in copies of the parameters
	// (SGD with momentum 1, Adam 2).
	StateCopies float64
	// MinMicro is the fewest samples a micro-batch may have (BatchNorm's
	// statistics need 2 at least); 0 or 1: any.
	MinMicro int
	// Balance cuts the layers into p stages (the trainer's own cut).
	Balance func(p int) ([]int, error)
}

// GridLayer is one layer, per sample where it says so.
type GridLayer struct {
	Cost       float64 // relative work (any unit: only shares are used)
	ParamBytes float64 // its parameters, float32
	OutBytes   float64 // its output per sample: what crosses a cut after it
	// HeldBytes are the activations it keeps per sample for backward;
	// HeldSplitBytes the part of them tensor parallelism splits by T.
	HeldBytes, HeldSplitBytes float64
	// Tensor marks a layer split by tensor parallelism (a transformer
	// block: Megatron-LM's column- then row-parallel attention and MLP):
	// its cost and parameters divide by T, and each micro-batch costs two
	// allreduces of TensorBytes per sample forward and two backward.
	Tensor      bool
	TensorBytes float64
}

// Cluster is where the grid runs: nodes of RanksPerNode ranks, their link
// (Net) and a per-rank memory budget (0: none).
type Cluster struct {
	Nodes, RanksPerNode int
	Net                 Network
	MemBytes            float64
}

// GridPlan is one grid's prediction.
type GridPlan struct {
	D, P, T, M int
	Bubble     float64 // (P-1)/(M+P-1)
	// per step: the slowest stage's compute and tensor allreduces
	// stretched by the bubble, the pipeline's fill and drain transfers,
	// and the data-parallel gradient allreduce (by Allreduce)
	ComputeS, TensorS, PipeS, DataS, StepS float64
	Allreduce                              string
	PipeBytes                              float64 // activations one stage boundary carries per step, both ways
	TensorCalls                            int     // tensor allreduces per rank per step
	MemBytes                               float64 // the fullest rank's parameters, gradients, optimizer state and activations (1F1B)
	SamplesS                               float64
	Fits                                   bool
}

// Grids predicts every grid of the cluster's ranks: D x P x T = nodes x
// ranks per node, T dividing the heads and at most a node's ranks (its
// allreduces are the busiest, so its ranks stay within one node), P at most
// the layers, and for each the micro-batch count M (a divisor of the
// batch, at least P when P > 1, of at least MinMicro samples) that ranks
// best: the fewest that fit the budget, more only when they are faster. Ranked: grids that fit
// the memory budget first, then by the job's samples/s (the batch is per
// replica, so the global batch is D times it), then by memory; grids that
// do not fit, by memory.
//
// The model (stated, not fitted to measurements):
//   - compute splits by the stage's share of the layers' cost, and a
//     tensor-parallel layer's by T; a stage's micro-batch takes its share
//     over M, and the pipeline takes (M+P-1) of the slowest stage's
//     micro-batches (GPipe's and 1F1B's bubble);
//   - each micro-batch's tensor allreduces (ring over T ranks, inside a
//     node) are on the critical path like compute;
//   - transfers between stages overlap compute except the P-1 hops of the
//     fill and the P-1 of the drain; a hop crosses the link unless a
//     replica's whole pipeline fits in one node;
//   - the gradient allreduce among the D replicas of the fullest stage is
//     the fastest of ring, mpi and hier on D ranks spread over
//     ceil(D / (R/T)) nodes (Predict's formulas), not overlapped;
//   - memory: parameters, gradients and optimizer state of the fullest
//     stage, plus 1F1B's activations: stage s holds min(P-s, M)
//     micro-batches (at P = 1, micro-batches are accumulated one after
//     another, so M only lowers the activations);
//   - a micro-batch computes as fast per sample as the whole batch (small
//     micro-batches are in truth less efficient: not modelled).
func Grids(m GridModel, c Cluster) ([]GridPlan, error) {
	ranks := c.Nodes * max(c.RanksPerNode, 1)
	rpn := max(c.RanksPerNode, 1)
	var out []GridPlan
	for t := 1; t <= ranks; t++ {
		if ranks%t != 0 || (t > 1 && (m.Heads == 0 || m.Heads%t != 0 || t > rpn)) {
			continue
		}
		for p := 1; p <= ranks/t && p <= len(m.Layers); p++ {
			if (ranks/t)%p != 0 {
				continue
			}
			d := ranks / t / p
			cuts, err := m.Balance(p)
			if err != nil {
				return nil, err
			}
			var best *GridPlan
			for mb := 1; mb <= m.Batch; mb++ {
				if m.Batch%mb != 0 || (p > 1 && mb < p) || m.Batch/mb < m.MinMicro {
					continue
				}
				g := m.grid(c, d, p, t, mb, cuts)
				// M rising: a larger M must be strictly faster, or fit
				// where the smaller does not, to be chosen (small
				// micro-batches compute less efficiently than modelled).
				if best == nil || (g.Fits && !best.Fits) || (g.Fits == best.Fits && better(g, *best) && (!g.Fits || g.SamplesS > best.SamplesS*(1+1e-9))) {
					best = &g
				}
			}
			if best != nil {
				out = append(out, *best)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no grid of %d ranks: the batch %d splits into too few micro-batches of %d sample(s) or more", ranks, m.Batch, max(m.MinMicro, 1))
	}
	sort.SliceStable(out, func(i, j int) bool { return better(out[i], out[j]) })
	return out, nil
}

// better ranks a before b: fitting the memory budget first, then by
// throughput (samples/s of the whole job: a grid with more replicas
// trains a larger global batch per step), then by memory.
func better(a, b GridPlan) bool {
	switch {
	case a.Fits != b.Fits:
		return a.Fits
	case !a.Fits:
		return a.MemBytes < b.MemBytes
	case a.SamplesS != b.SamplesS:
		return a.SamplesS > b.SamplesS*(1+1e-9)
	}
	return a.MemBytes < b.MemBytes
}

func (m GridModel) grid(c Cluster, d, p, t, mb int, cuts []int) GridPlan {
	g := GridPlan{D: d, P: p, T: t, M: mb, Bubble: float64(p-1) / float64(mb+p-1)}
	total := 0.0
	for _, l := range m.Layers {
		total += l.Cost
	}
	rpn := max(c.RanksPerNode, 1)
	intra := c.Net
	intra.BytesPerS = c.Net.intra()
	per := float64(m.Batch) / float64(mb) // samples per micro-batch
	var slowest, slowCompute, slowTensor, fullestParams float64
	for s := range p {
		lo, hi := cuts[s], len(m.Layers)
		if s+1 < p {
			hi = cuts[s+1]
		}
		var cost, params, held, tensor float64
		calls := 0
		for _, l := range m.Layers[lo:hi] {
			k := 1.0
			if l.Tensor {
				k = float64(t)
				if t > 1 {
					tensor += 4 * Ring(intra, t, l.TensorBytes*per)
					calls += 4
				}
			}
			cost += l.Cost / k
			params += l.ParamBytes / k
			held += l.HeldBytes + l.HeldSplitBytes/k
		}
		compute := m.ComputeS * cost / total / float64(mb)
		if compute+tensor > slowest {
			slowest, slowCompute, slowTensor = compute+tensor, compute, tensor
		}
		g.TensorCalls = max(g.TensorCalls, calls*mb)
		fullestParams = max(fullestParams, params)
		slots := float64(min(p-s, mb))
		g.MemBytes = max(g.MemBytes, params*(2+m.StateCopies)+held*per*slots)
		if s > 0 {
			g.PipeBytes = max(g.PipeBytes, 2*m.Layers[lo-1].OutBytes*float64(m.Batch))
		}
	}
	// The critical path: M+P-1 of the slowest stage's micro-batches.
	g.ComputeS = float64(mb+p-1) * slowCompute
	g.TensorS = float64(mb+p-1) * slowTensor
	if p > 1 {
		hop := c.Net
		if d*t*p <= rpn {
			hop = intra
		}
		msg := g.PipeBytes / 2 / float64(mb)
		g.PipeS = 2 * float64(p-1) * (hop.LatencyS + msg/hop.BytesPerS)
	}
	if d > 1 {
		perNode := max(rpn/t, 1)
		nodes := (d + perNode - 1) / perNode
		job := Job{ParamBytes: fullestParams, ComputeS: 1, BatchPerRank: 1, RanksPerNode: min(perNode, d)}
		g.DataS = math.Inf(1)
		for _, pr := range Predict(c.Net, job, nodes) {
			if (pr.Strategy == "ring" || pr.Strategy == "mpi" || pr.Strategy == "hier") && pr.CommS < g.DataS {
				g.DataS, g.Allreduce = pr.CommS, pr.Strategy
			}
		}
	}
	g.StepS = g.ComputeS + g.TensorS + g.PipeS + g.DataS
	g.SamplesS = float64(m.Batch*d) / g.StepS
	g.Fits = c.MemBytes <= 0 || g.MemBytes <= c.MemBytes
	return g
}
