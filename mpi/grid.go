package mpi

import "fmt"

// Shape is a rank grid's extent: D data-parallel replicas x P pipeline
// stages x T tensor-parallel shards, np = D P T.
type Shape struct{ D, P, T int }

// Coord is one rank's place on the grid: its replica, stage and shard.
type Coord struct{ D, P, T int }

// NewShape fits a P x T model-parallel group into np ranks, the rest being
// data-parallel replicas, or says in one line why it cannot.
func NewShape(np, p, t int) (Shape, error) {
	switch {
	case p < 1:
		return Shape{}, fmt.Errorf("--pipeline %d: give 1 or more stages", p)
	case t < 1:
		return Shape{}, fmt.Errorf("--tensor-parallel %d: give 1 or more shards", t)
	case np%(p*t) != 0:
		return Shape{}, fmt.Errorf("%d rank(s) do not divide into --pipeline %d x --tensor-parallel %d = %d: run a multiple of %d ranks", np, p, t, p*t, p*t)
	}
	return Shape{D: np / (p * t), P: p, T: t}, nil
}

// Size is D P T.
func (s Shape) Size() int { return s.D * s.P * s.T }

// Coord is the place of world rank r. The order is Megatron-LM's: tensor
// shards vary fastest, so a stage's T shards are neighbouring ranks and
// share a host when mpirun maps ranks by core or slot (their allreduce is
// the busiest: two per layer each way); then replicas, so the D replicas
// of a stage are neighbours too and a hierarchical allreduce finds them
// on as few hosts as it can; stages vary slowest, since only activations
// of one micro-batch at a time cross between them.
func (s Shape) Coord(r int) Coord {
	return Coord{T: r % s.T, D: r / s.T % s.D, P: r / (s.T * s.D)}
}

// Rank is the world rank at c, the inverse of Coord.
func (s Shape) Rank(c Coord) int { return c.T + s.T*(c.D+s.D*c.P) }

// Grid is this rank's communicators on a grid, each a World of its own
// (own ring, own tag space), split once at start-up:
//   - Data: the D replicas of this rank's stage and shard, which average
//     gradients (or shard optimizer state) among themselves;
//   - Pipe: the P stages of this rank's replica and shard, ranked by stage;
//   - Tensor: the T shards of this rank's stage and replica, ranked by shard.
//
// A World's rank in each is this rank's coordinate along it.
type Grid struct {
	Shape
	At                 Coord
	Data, Pipe, Tensor *World
}

// NewGrid splits w by s (collective: every rank calls it with the same
// shape). Free releases the three communicators.
func NewGrid(w *World, s Shape) (*Grid, error) {
	if s.Size() != w.Size() {
		return nil, fmt.Errorf("grid %dx%dx%d for %d rank(s)", s.D, s.P, s.T, w.Size())
	}
	g := &Grid{Shape: s, At: s.Coord(w.Rank())}
	c := g.At
	// A colour is the rank of the group's first member on the other two
	// axes (unique per group); the key orders members along the axis.
	splits := []struct {
		dst        **World
		color, key int
	}{
		{&g.Data, s.Rank(Coord{D: 0, P: c.P, T: c.T}), c.D},
		{&g.Pipe, s.Rank(Coord{D: c.D, P: 0, T: c.T}), c.P},
		{&g.Tensor, s.Rank(Coord{D: c.D, P: c.P, T: 0}), c.T},
	}
	for _, sp := range splits {
		d, err := w.Split(sp.color, sp.key)
		if err != nil {
			return nil, err // the job aborts; Free would be collective
		}
		*sp.dst = d
	}
	return g, nil
}

// Free releases the grid's communicators (collective).
func (g *Grid) Free() error {
	var first error
	for _, w := range []*World{g.Data, g.Pipe, g.Tensor} {
		if w == nil {
			continue
		}
		if err := w.Free(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
