package trainer

import (
	"fmt"
	"strconv"
	"time"
)

// allreduce is --strategy allreduce (Horovod, PyTorch DDP, Baidu's ring):
// every step the gradients are averaged over all ranks, in buckets of
// whole tensors that a communication goroutine reduces as backward
// finishes them (gradsync.go), with the executor's reducer for the
// --allreduce algorithm. With --bucket-mb auto it registers the bucket
// tuner (autotune.go) as a hook.
type allreduce struct {
	strategyBase
	s    *Session
	red  bucketReducer
	sync *gradSync
	kept int // --bucket-mb auto's choice, saved in checkpoints; 0 before
}

func newAllreduce(s *Session) (Strategy, error) {
	d := &s.Cfg.Dist
	red, err := s.exec.Reducer(s.W, d.Allreduce, d.Compress)
	if err != nil {
		return nil, err
	}
	a := &allreduce{s: s, red: red}
	if err := a.useBuckets(d.Buckets.Bytes()); err != nil {
		red.close()
		return nil, err
	}
	return a, nil
}

// useBuckets (re)builds the buckets with a cap of capBytes.
func (a *allreduce) useBuckets(capBytes int) error {
	if a.sync != nil {
		a.sync.close()
	}
	p := a.s.Model.Params
	bs, overlap := makeBuckets(p, capBytes), a.s.Cfg.Dist.Overlap
	if a.red.whole() {
		bs, overlap = []bucket{{0, p.Len()}}, false
	}
	// A world of one reduces nothing, and handing a bucket to the
	// communication goroutine (locked to a thread of its own) and taking
	// it back costs two thread hand-offs, 12 to 67 us each across cores on
	// this project's VM: the MLP's step at one thread went from 1.41 to
	// 0.57 ms without them (--overlap on against off).
	if a.s.W.Size() == 1 {
		overlap = false
	}
	g, err := newGradSync(a.red, bs, overlap)
	if err != nil {
		return err
	}
	g.observe = a.s.observeBucket
	g.label(p)
	g.tamper = a.s.fault.tamper(a.s.Job.Rank(), func() int { return a.s.State.Step })
	a.sync = g
	a.s.bucketsChanged(capBytes)
	return nil
}

// Start restores --bucket-mb auto's choice from the checkpoint resumed
// (so the resumed steps are the uninterrupted run's, bit for bit) or
// starts the tuner.
func (a *allreduce) Start() (bool, error) {
	s := a.s
	if !s.Cfg.Dist.Buckets.Auto || s.W.Size() == 1 {
		return false, nil
	}
	kept := []int64{0}
	if s.W.Rank() == 0 && s.State.Meta != nil {
		kept[0], _ = strconv.ParseInt(s.State.Meta["bucket_bytes"], 10, 64)
	}
	if err := s.W.BcastInt64(kept, 0); err != nil {
		return false, err
	}
	if kept[0] > 0 {
		a.kept = int(kept[0])
		s.rep.say("bucket autotune: %s, as chosen before the checkpoint\n", mib(a.kept))
		return false, a.useBuckets(a.kept)
	}
	t, err := newBucketTuner(a)
	if err != nil {
		return false, err
	}
	if len(t.sizes) == 1 {
		s.rep.say("bucket autotune: every size from 1/4 MiB up gives this model one bucket; nothing to try\n")
		a.kept = t.sizes[0]
		return false, nil
	}
	s.hooks = append(s.hooks, t)
	return false, nil
}

func (a *allreduce) Describe() string {
	how := fmt.Sprintf(" in %d bucket(s)", len(a.sync.buckets))
	if a.sync.overlap {
		how += " overlapped with backward"
	}
	if a.red.whole() {
		how = " of the whole gradient after backward"
	}
	if a.s.W.Size() == 1 {
		how = " (one rank: nothing to reduce)"
	}
	return "allreduce " + a.red.describe() + how
}

func (a *allreduce) BeginStep(int) bool {
	a.sync.begin()
	return true
}

func (a *allreduce) GradReady(lo int) { a.sync.ready(lo) }

func (a *allreduce) Communicate(float64, int) (bool, error) { return false, a.sync.finish() }

func (a *allreduce) BeforeSave(meta map[string]string) error {
	if a.kept > 0 {
		meta["bucket_bytes"] = strconv.Itoa(a.kept)
	}
	return nil
}

func (a *allreduce) Waiting() time.Duration { return a.sync.takeWaiting() }

func (a *allreduce) Close() {
	a.sync.close()
	a.red.close()
}
