package trainer

import (
	"fmt"

	"train/mpi"
)

// bnSync is synchronised BatchNorm (--bn sync): the model's Mode.Reduce
// sums each layer's per-channel statistics over the data-parallel ranks,
// on a communicator of its own, because BatchNorm's reductions run in the
// training goroutine while the communication goroutine may be reducing a
// gradient bucket. Layers cannot return errors: the first failure is kept
// and reported after the pass (the values are then meaningless, and the
// step is abandoned).
type bnSync struct {
	w    *mpi.World
	prog *progress
	err  error
}

// syncBN sets synchronised BatchNorm up on the trainers' world, with more
// than one rank (one rank's statistics are the global ones).
func (s *Session) syncBN() error {
	if s.Cfg.Dist.BN != BNSync || s.W.Size() == 1 {
		return nil
	}
	w, err := s.W.Dup()
	if err != nil {
		return err
	}
	s.flight.record(w, s.W.Flight().Name()+".bn")
	s.bn = &bnSync{w: w, prog: &s.prog}
	s.undo = append(s.undo, func() { w.Free() })
	s.Model.Mode.Reduce = s.bn.reduce
	return nil
}

func (b *bnSync) reduce(buf []float64) {
	b.prog.enter(opBatchNorm)
	defer b.prog.leave()
	if err := b.w.AllreduceFloat64(buf, mpi.Sum); err != nil && b.err == nil {
		b.err = fmt.Errorf("synchronised BatchNorm: %w", err)
	}
}

// failure is the first failed reduction (nil without synchronised
// BatchNorm).
func (b *bnSync) failure() error {
	if b == nil {
		return nil
	}
	return b.err
}
