package trainer

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"train/mpi"
)

// localSGD is --strategy local-sgd (model averaging; SINGA's distributed
// Hogwild groups): every rank steps alone on its own batches, and every
// --sync-every steps the parameters, the optimizer state (so that every
// sync point, checkpoints included, leaves identical replicas and a resume
// is exact) and BatchNorm's running statistics (per rank under local SGD)
// become their mean over the ranks, with the --allreduce algorithm. Sync
// averages too, before every evaluation, checkpoint and the end.
type localSGD struct {
	strategyBase
	s        *Session
	red      hostReducer
	diverged bool // local steps since the last average
}

func newLocalSGD(s *Session) (Strategy, error) {
	red, err := newHostReducer(s.W, s.Cfg.Dist.Allreduce, mpi.None)
	if err != nil {
		return nil, err
	}
	return &localSGD{s: s, red: red}, nil
}

func (l *localSGD) Describe() string {
	return fmt.Sprintf("local SGD: replicas averaged every %d steps with allreduce %s", l.s.Cfg.Dist.SyncEvery, l.red.name)
}

func (l *localSGD) AfterStep(step int) (time.Duration, error) {
	l.diverged = true
	if step%l.s.Cfg.Dist.SyncEvery != 0 {
		return 0, nil
	}
	t := time.Now()
	if err := l.average(); err != nil {
		return 0, err
	}
	// The replicas are one again: so are their statistics.
	return time.Since(t), l.s.averageBuffers()
}

func (l *localSGD) Sync() error { return l.average() }

// average makes the replicas one: parameters and optimizer state become
// their mean over the ranks. A no-op while no local step was taken since
// the last.
func (l *localSGD) average() error {
	if !l.diverged {
		return nil
	}
	s := l.s
	s.prog.enter(opAverage)
	defer s.prog.leave()
	if err := l.red.fn(s.Model.Params.Data, mpi.Mean); err != nil {
		return err
	}
	st := s.Opt.State()
	for _, name := range slices.Sorted(maps.Keys(st)) { // the same order on every rank
		if err := l.red.fn(st[name], mpi.Mean); err != nil {
			return err
		}
	}
	l.diverged = false
	return nil
}

func (l *localSGD) Close() { l.red.free() }
