package trainer

// The training loop, as llm.c's main reads: for each step, a batch, the
// executor's forward, backward and update with the strategy's
// communication around them, the hooks, and the log line, the stop check
// and the checkpoint when they are due. Everything else is a unit the loop
// calls: Executor (executor.go), Strategy (strategy.go), Hook (hook.go).

import (
	"errors"
	"fmt"
	"syscall"
	"time"
	"train/checkpoint"

	"train/data"
	"train/mpi"
)

// Run trains from the current position to --epochs or --max-steps (or a
// stop signal), then makes the replicas agree and checks that they do. A
// parameter server's rank serves instead.
func (s *Session) Run() error {
	if s.serving {
		return s.strategy.Serve()
	}
	if err := s.train(); err != nil {
		return err
	}
	return s.strategy.Finish()
}

// stats are sums over samples, allreduced before they are printed.
type stats struct{ loss, correct, count float64 }

func (a *stats) add(loss float64, correct, n int) {
	a.loss += loss * float64(n)
	a.correct += float64(correct)
	a.count += float64(n)
}

// window is what the loop counts between log lines, and over the run.
type window struct {
	stats
	steps          int
	start          time.Time
	ran            int           // steps this process has run
	stepTime, wait time.Duration // in training steps alone (no evaluation, logging or checkpoints)
}

func (s *Session) train() error {
	c, st := &s.Cfg, &s.State
	b := c.Data.BatchSize
	global := b * s.W.Size()
	spe := s.Sampler.StepsPerEpoch()
	total := c.Optim.Epochs * spe // planned steps, for the progress bar
	if c.Optim.MaxSteps > 0 {
		total = min(total, c.Optim.MaxSteps)
	}
	batches := s.newBatches()
	defer batches.wait()
	samples, err := openSampleLog(c.Observe.SampleLog, s.Job.Rank(), s.trainSet)
	if err != nil {
		return err
	}
	defer samples.close()
	if err := s.exec.ToDevice(); err != nil {
		return err
	}
	win := window{start: time.Now()}
	var epoch stats
	epochStart := time.Now()
	for st.Epoch < c.Optim.Epochs && !s.done() {
		order := s.plan.Epoch(st.Epoch)
		spe := len(order) / b // a resumed epoch of tar shards may have fewer
		for st.StepInEpoch < spe && !s.done() && s.stopBy == "" {
			s.prog.at(st.Step)
			if err := s.fault.fire(s.Job.Rank(), st.Step); err != nil {
				return err
			}
			// 1. The batch.
			var t stepTimes
			t.start = time.Now()
			x, y, err := batches.get(st.Epoch, st.StepInEpoch, order)
			if err != nil {
				return err
			}
			t.data = time.Since(t.start)
			// 2, 3. Forward, backward and update, with the strategy's
			// communication around them.
			lr := s.Sched.At(st.Samples, int64(global))
			sent := mpi.Counted().Sent
			loss, correct, err := s.step(x, y, lr, &t)
			if err != nil {
				return err
			}
			s.stepSent += mpi.Counted().Sent - sent
			samples.step(st.Epoch, st.Step, order[st.StepInEpoch*b:(st.StepInEpoch+1)*b])
			took := time.Since(t.start)
			st.Step, st.StepInEpoch, st.Samples = st.Step+1, st.StepInEpoch+1, st.Samples+int64(global)
			s.stale = true
			waited, err := s.strategy.AfterStep(st.Step)
			if err != nil {
				return err
			}
			win.add(loss, correct, s.scored(b))
			epoch.add(loss, correct, s.scored(b))
			win.steps, win.ran, win.stepTime = win.steps+1, win.ran+1, win.stepTime+took
			// 4. The hooks.
			ev := StepEvent{Step: st.Step, Epoch: st.Epoch + 1, Times: &t, Took: took, Wait: t.wait + waited, Samples: global,
				LR: lr, Loss: loss, Ran: win.ran, StepTime: win.stepTime, Total: total}
			for _, h := range s.hooks {
				if err := h.Step(&ev); err != nil {
					return err
				}
			}
			// 5. The log line, the stop check and the checkpoint, when due.
			if st.Step%c.Observe.LogEvery == 0 {
				if err := s.log(&win, lr, global, spe); err != nil {
					return err
				}
			}
			if e := c.Observe.EvalEvery; e > 0 && st.Step%e == 0 && st.StepInEpoch < spe && !s.done() && s.evaluate {
				if err := s.evalNow(); err != nil {
					return err
				}
			}
			if s.strategy.StopCheck(st.Step) {
				if err := s.checkStop(); err != nil {
					return err
				}
			}
			if c.Checkpoint.Dir != "" && c.Checkpoint.Every > 0 && st.Step%c.Checkpoint.Every == 0 {
				if err := s.checkpoint(); err != nil {
					return err
				}
			}
		}
		if st.StepInEpoch < spe {
			break // stopped by --max-steps or a signal inside the epoch
		}
		if s.evaluate {
			if err := s.endEpoch(&epoch, time.Since(epochStart), true); err != nil {
				return err
			}
		}
		st.Epoch, st.StepInEpoch = st.Epoch+1, 0
		epoch, epochStart = stats{}, time.Now()
	}
	if st.StepInEpoch > 0 && s.stopBy == "" && s.evaluate { // a stopped job has no time for an evaluation
		if err := s.endEpoch(&epoch, time.Since(epochStart), false); err != nil {
			return err
		}
	}
	return s.finish(&win, global)
}

// done reports whether --max-steps is reached.
func (s *Session) done() bool {
	return s.Cfg.Optim.MaxSteps > 0 && s.State.Step >= s.Cfg.Optim.MaxSteps
}

// step trains on one batch (x, y) at learning rate lr: forward and the
// loss; backward, the strategy starting to reduce each bucket of
// gradients as it becomes final; the rest of the communication; the
// update (unless parameter servers did it). Each part is timed into t
// (t.start and t.data are the caller's). It returns this rank's mean loss
// and correct count.
func (s *Session) step(x []float32, y []int32, lr float64, t *stepTimes) (float64, int, error) {
	e, strat, step := s.exec, s.strategy, s.State.Step
	lap := t.laps()
	if strat.BeginStep(step) {
		e.ZeroGrad()
	}
	if err := e.Forward(x, y); err != nil {
		return 0, 0, err
	}
	if s.fault.is("nan", s.Job.Rank(), step) {
		e.InjectNaN()
	}
	t.forward = lap()
	if err := e.Backward(strat.GradReady); err != nil {
		return 0, 0, err
	}
	t.backward = lap()
	s.prog.enter(opGradients)
	updated, err := strat.Communicate(lr, step+1)
	if err == nil {
		err = e.Settle()
	}
	s.prog.leave()
	if err == nil {
		err = s.bn.failure()
	}
	if err != nil {
		return 0, 0, err
	}
	t.wait = lap()
	finite := true
	if !updated {
		if finite, err = e.Update(lr, step+1, s.Cfg.Optim.ClipGradNorm); err != nil {
			return 0, 0, err
		}
	}
	t.optimize = lap()
	loss, correct, err := e.Result()
	if err != nil {
		return 0, 0, err
	}
	if !finite {
		return 0, 0, s.notFinite(loss)
	}
	return loss, correct, nil
}

// laps returns a function that ends a phase of the step and starts the
// next: phases end where the next begins, so they tile the step on the
// timeline (one clock reading per boundary).
func (t *stepTimes) laps() func() time.Duration {
	at := t.start.Add(t.data)
	return func() time.Duration {
		now := time.Now()
		d := now.Sub(at)
		at = now
		return d
	}
}

// notFinite is the error of a step whose gradients were not finite.
// Every rank applied the same averaged gradient, so every rank sees this
// at the same step: an agreed stop, and no checkpoint of the spoilt
// parameters.
func (s *Session) notFinite(loss float64) error {
	kept := "no checkpoint was written"
	if s.lastSaved >= 0 {
		kept = fmt.Sprintf("the last checkpoint, step %d, is kept", s.lastSaved)
	}
	return &JobError{Rank: 0, Own: s.Job.Rank() == 0, Err: notFiniteError{fmt.Errorf(
		"step %d: the gradients are not finite (NaN or Inf; loss %.4g on rank 0): training stopped, %s; lower --lr or set --clip-grad-norm",
		s.State.Step, loss, kept)}}
}

// notFiniteError marks the stop notFinite makes (the flight recorder
// dumps for it as "nan").
type notFiniteError struct{ error }

func (e notFiniteError) Unwrap() error { return e.error }

func isNotFinite(err error) bool {
	var n notFiniteError
	return errors.As(err, &n)
}

// log sums the window over the ranks and hands it to the hooks.
func (s *Session) log(win *window, lr float64, global, spe int) error {
	sum := []float64{win.loss, win.correct, win.count}
	s.prog.enter(opLog)
	err := s.Job.AllreduceFloat64(sum, mpi.Sum)
	s.prog.leave()
	if err != nil {
		return err
	}
	wait := s.strategy.Waiting()
	win.wait += wait
	st := &s.State
	ev := LogEvent{Epoch: st.Epoch + 1, Step: st.Step, StepInEpoch: st.StepInEpoch, StepsPerEpoch: spe,
		Loss: sum[0] / sum[2], Accuracy: sum[1] / sum[2], LR: lr,
		SamplesPerSecond: float64(win.steps) * float64(global) / time.Since(win.start).Seconds(),
		WaitMs:           wait.Seconds() * 1e3 / float64(win.steps)}
	for _, h := range s.hooks {
		h.Log(&ev)
	}
	win.stats, win.steps, win.start = stats{}, 0, time.Now()
	return nil
}

// checkStop ends training at this step on every rank if a signal reached
// any rank: the ranks agree with a one-value allreduce.
func (s *Session) checkStop() error {
	flag := []int64{s.signals.received()}
	s.prog.enter(opStopCheck)
	err := s.Job.AllreduceInt64(flag, mpi.Max)
	s.prog.leave()
	if err != nil {
		return err
	}
	if flag[0] != 0 {
		s.stopBy = syscall.Signal(flag[0]).String()
		if name, ok := sigNames[syscall.Signal(flag[0])]; ok {
			s.stopBy = name
		}
	}
	return nil
}

var sigNames = map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGUSR1: "SIGUSR1"}

// endEpoch evaluates the test set across ranks and hands the epoch (or
// the part of it that ran) to the hooks.
func (s *Session) endEpoch(train *stats, took time.Duration, done bool) error {
	sum, start, evalTook, err := s.evaluateAcross(train.loss, train.correct, train.count)
	if err != nil {
		return err
	}
	st := &s.State
	ev := EpochEvent{Epoch: st.Epoch + 1, Step: st.Step, Done: done,
		TrainLoss: sum[0] / sum[2], TrainAccuracy: sum[1] / sum[2], TestLoss: sum[3] / sum[5], TestAcc: sum[4] / sum[5],
		Took: took, EvalStart: start, EvalTook: evalTook}
	for _, h := range s.hooks {
		h.Epoch(&ev)
	}
	return nil
}

// evalNow evaluates the test split inside an epoch (--eval-every; the
// epoch's end evaluates anyway) and tells the hooks that watch for it.
func (s *Session) evalNow() error {
	sum, start, _, err := s.evaluateAcross()
	if err != nil {
		return err
	}
	st := &s.State
	ev := EvalEvent{Epoch: st.Epoch + 1, Step: st.Step, Samples: st.Samples, TestLoss: sum[0] / sum[2], TestAcc: sum[1] / sum[2], Took: time.Since(start)}
	for _, h := range s.hooks {
		if w, ok := h.(evalWatcher); ok {
			w.Eval(&ev)
		}
	}
	return nil
}

// evaluateAcross brings the replicas' buffers together, evaluates this
// rank's shard of the test set, and sums local (this rank's other
// figures, if any) followed by the test loss, correct count and sample
// count over the ranks, in one allreduce. took is the evaluation's own
// time, before the sum.
func (s *Session) evaluateAcross(local ...float64) (sum []float64, start time.Time, took time.Duration, err error) {
	if err := s.syncBuffers(); err != nil {
		return nil, start, 0, err
	}
	start = time.Now()
	test, err := s.evaluateTest()
	if err != nil {
		return nil, start, 0, err
	}
	took = time.Since(start)
	sum = append(local, test.loss, test.correct, test.count)
	s.prog.enter(opEvaluation)
	err = s.Job.AllreduceFloat64(sum, mpi.Sum)
	s.prog.leave()
	return sum, start, took, err
}

// evaluateTest runs this rank's shard of the test set in evaluation mode
// (BatchNorm on its running statistics).
func (s *Session) evaluateTest() (stats, error) {
	s.Model.Mode.Training = false
	defer func() { s.Model.Mode.Training = true }()
	idx := data.Shard(s.testSet.Len(), s.W.Rank(), s.W.Size())
	eb := s.Cfg.Data.EvalBatch
	x := make([]float32, eb*s.testSet.XSize())
	y := make([]int32, eb*s.testSet.YSize())
	var st stats
	for lo := 0; lo < len(idx); lo += eb {
		hi := min(lo+eb, len(idx))
		n := hi - lo
		if err := s.testSet.Batch(x, y, idx[lo:hi], 0); err != nil {
			return st, err
		}
		loss, correct, err := s.exec.Evaluate(x, y, n)
		if err != nil {
			return st, err
		}
		st.add(loss, correct, s.scored(n))
	}
	// ZeRO stage 3 gathers every layer around each forward, a collective:
	// a rank with fewer batches than another runs as many more passes
	// (on one sample, its result unused) as keep it in step.
	if z := s.zero; z != nil && z.stage == 3 {
		most := 0
		for r := range s.W.Size() {
			most = max(most, len(data.Shard(s.testSet.Len(), r, s.W.Size())))
		}
		for extra := (most+eb-1)/eb - (len(idx)+eb-1)/eb; extra > 0; extra-- {
			if err := s.testSet.Batch(x, y, []int{0}, 0); err != nil {
				return st, err
			}
			if _, _, err := s.exec.Evaluate(x, y, 1); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// parts is how many parts the model is split into: P x T on a grid.
func (s *Session) parts() int {
	if s.grid == nil {
		return 1
	}
	return s.grid.P * s.grid.T
}

// scored is how many predictions n samples give on this rank: none on a
// pipeline stage before the last (the last stage scores them; the sums
// over the job count each once per tensor-parallel shard, alike in
// numerator and denominator).
func (s *Session) scored(n int) int {
	if !s.Model.Last() {
		return 0
	}
	return n * s.Model.Positions()
}

// finish writes the final checkpoint, makes the replicas agree, checks
// that every rank holds the same bits, and tells the hooks.
func (s *Session) finish(win *window, global int) error {
	c, st := &s.Cfg, &s.State
	if c.Checkpoint.Dir != "" && s.lastSaved != st.Step {
		if err := s.checkpoint(); err != nil {
			return err
		}
	}
	if err := s.syncBuffers(); err != nil {
		return err
	}
	p := s.Model.Params
	s.prog.enter(opReplicaCheck)
	var sum uint32
	var err error
	if s.zero != nil && s.zero.stage == 3 {
		// Only the own shard is held: reading the whole buffer here
		// brought every freed page back (4 ranks: 459 MiB peak RSS
		// against the 402 of the training steps).
		sum, err = s.zeroChecksum()
	} else {
		sum = checkpoint.Checksum(p.Data, p.Buffers)
	}
	if err == nil {
		sum, err = verifyReplicas(s.W, sum)
	}
	s.prog.leave()
	if err != nil {
		return err
	}
	if s.zero != nil || c.Set["zero"] {
		if err := s.zeroReport(win); err != nil {
			return err
		}
	}
	if s.grid != nil {
		if err := s.gridReport(); err != nil {
			return err
		}
	}
	win.wait += s.strategy.Waiting()
	_, flops := s.Model.FLOPs()
	ev := EndEvent{Step: st.Step, Ran: win.ran, Global: global, StepTime: win.stepTime, WaitTime: win.wait,
		FLOPsPerSample: flops, Ranks: s.W.Size(), Parts: s.parts(), CRC: sum, StopBy: s.stopBy, CheckpointDir: c.Checkpoint.Dir}
	for _, h := range s.hooks {
		h.End(&ev)
	}
	return nil
}
