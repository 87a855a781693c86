package trainer

import (
	"time"
)

// What package bench's step and strategy benchmarks use of a Session: they
// build it with NewSession (Options.Bench) like training, and drive it.

// Steps trains n steps as the loop does (the batch, forward, backward with
// the strategy's communication, the update), with the batches of epoch 0
// in order, and no hooks, log lines, stop checks or checkpoints: the timed
// window of train bench step.
func (s *Session) Steps(n int) error {
	if s.benchBatches == nil {
		if err := s.exec.ToDevice(); err != nil {
			return err
		}
		s.benchBatches, s.benchOrder = s.newBatches(), s.plan.Epoch(0)
		s.undo = append(s.undo, s.benchBatches.wait)
	}
	spe := len(s.benchOrder) / s.Cfg.Data.BatchSize
	global := s.Cfg.Data.BatchSize * s.W.Size()
	for range n {
		var t stepTimes
		t.start = time.Now()
		x, y, err := s.benchBatches.get(0, s.State.Step%spe, s.benchOrder)
		if err != nil {
			return err
		}
		t.data = time.Since(t.start)
		if _, _, err := s.step(x, y, s.Sched.At(s.State.Samples, int64(global)), &t); err != nil {
			return err
		}
		s.State.Step++
		s.State.Samples += int64(global)
	}
	return nil
}

// Waiting is the time steps waited for gradients since the last call.
func (s *Session) Waiting() time.Duration { return s.strategy.Waiting() }

// Describe says where the arithmetic runs (the executor's account).
func (s *Session) Describe() string { return s.exec.Describe() }

// Device is the executor's benchmark side, nil on the CPU (whose
// yardstick, SGEMM, package bench measures itself).
func (s *Session) Device() DeviceBench {
	d, _ := s.exec.(DeviceBench)
	return d
}

// DeviceBench is what train bench step asks of a device executor beside
// the step: the matrix product it compares the step with, its peak memory
// and, with --gpu-profile, the time per layer kind.
type DeviceBench interface {
	GEMM() (name string, gflops func() (float64, error))
	PeakBytes() int64
	Profile() map[string]time.Duration
}

// AddHook adds a hook after the registered ones (bench strategies'
// counters).
func (s *Session) AddHook(h Hook) { s.hooks = append(s.hooks, h) }

// Serving reports whether this rank is a parameter server (Run serves).
func (s *Session) Serving() bool { return s.serving }

// ServedUpdates is what a parameter server rank did once Run returned:
// the updates it applied per worker (a synchronous server's updates; an
// asynchronous one's divided by the workers). 0 elsewhere.
func (s *Session) ServedUpdates() float64 {
	if !s.serving {
		return 0
	}
	switch p := s.strategy.(type) {
	case *psSync:
		return float64(p.stats.Updates)
	case *psAsync:
		return float64(p.stats.Updates) / float64(p.workers)
	}
	return 0
}

// Data describes the data, for a benchmark's header.
func (s *Session) Data() string { return s.dataName }
