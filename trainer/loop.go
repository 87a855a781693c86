package trainer

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"syscall"
	"time"

	"train/checkpoint"
	"train/data"
	"train/model"
	"train/mpi"
	"train/optim"
	"train/runlog"
)

// stats are sums over samples, allreduced before they are printed.
type stats struct{ loss, correct, count float64 }

func (s *stats) add(loss float64, correct, n int) {
	s.loss += loss * float64(n)
	s.correct += float64(correct)
	s.count += float64(n)
}

// loop trains from the current state to --epochs or --max-steps.
func (r *run) loop() error {
	c := &r.cfg
	s := &r.state
	p := r.model.Params
	b := c.BatchSize
	spe := r.sampler.StepsPerEpoch()
	x := make([]float32, b*r.train.SampleSize())
	y := make([]int32, b)
	var pre *prefetch
	if r.gpu != nil {
		pre = r.newPrefetch(b)
		defer pre.wait()
	}
	global := float64(b * r.w.Size())
	_, flopsPerSample := r.model.FLOPs()

	var window, epochStats stats
	windowStart, epochStart := time.Now(), time.Now()
	windowSteps := 0
	// Time in training steps alone (no evaluation, logging or
	// checkpoints), for the closing throughput figure.
	var stepTime, waitTime time.Duration
	firstStep := s.Step
	done := func() bool { return c.MaxSteps > 0 && s.Step >= c.MaxSteps }
	var lr float64
	total := c.Epochs * spe // planned steps, for the progress bar
	if c.MaxSteps > 0 {
		total = min(total, c.MaxSteps)
	}
	var st stepTimes
	lastLoss, lastSps := 0.0, 0.0
	if r.gpu != nil {
		if err := r.gpu.toDevice(); err != nil {
			return err
		}
	}

	for s.Epoch < c.Epochs && !done() {
		idx := r.sampler.Epoch(s.Epoch)
		for s.StepInEpoch < spe && !done() && r.stopBy == "" {
			r.prog.at(s.Step)
			if r.bench != nil && s.Step-firstStep == r.bench.warmup {
				r.bench.begin()
			}
			if err := r.fault.fire(r.w.Rank(), s.Step); err != nil {
				return err
			}
			st.start = time.Now()
			if r.gpu != nil {
				// The CPU builds the next batch while the GPU runs this step.
				x, y = pre.get(s.Epoch, s.StepInEpoch, idx)
				if s.StepInEpoch+1 < spe {
					pre.start(s.Epoch, s.StepInEpoch+1, idx)
				}
			} else {
				r.train.BatchAugmented(x, y, idx[s.StepInEpoch*b:(s.StepInEpoch+1)*b], r.augment, s.Epoch)
			}
			st.data = time.Since(st.start)
			lr = r.sched.At(s.Step)
			loss, correct, err := r.step(x, y, lr, &st)
			if err != nil {
				return err
			}
			took := time.Since(st.start)
			stepTime += took
			if r.bench != nil {
				r.bench.wait += st.wait
			}
			if r.tune != nil {
				if _, err := r.stepped(took); err != nil {
					return err
				}
			}
			r.met.observeStep(&st, b, lr)
			r.traceStep(&st, s.Step, took)
			s.Step++
			s.StepInEpoch++
			if c.Strategy == "local-sgd" {
				r.diverged = true
				if s.Step%c.SyncEvery == 0 {
					t := time.Now()
					if err := r.average(); err != nil {
						return err
					}
					if r.bench != nil {
						r.bench.wait += time.Since(t)
					}
				}
			}
			window.add(loss, correct, b)
			epochStats.add(loss, correct, b)
			windowSteps++

			if s.Step%c.LogEvery == 0 {
				sum := []float64{window.loss, window.correct, window.count}
				r.prog.enter(opLog)
				err := r.w.AllreduceFloat64(sum, mpi.Sum)
				r.prog.leave()
				if err != nil {
					return err
				}
				el := time.Since(windowStart).Seconds()
				wait := r.sync.takeWaiting()
				waitTime += wait
				lastLoss, lastSps = sum[0]/sum[2], float64(windowSteps)*global/el
				waitMs := wait.Seconds() * 1e3 / float64(windowSteps)
				r.rep.say("epoch %d/%d step %d (%d/%d) loss %.4f acc %.2f%% lr %.4g %.0f samples/s, gradient wait %.2f ms/step\n",
					s.Epoch+1, c.Epochs, s.Step, s.StepInEpoch, spe, lastLoss, 100*sum[1]/sum[2], lr, lastSps, waitMs)
				r.rep.record(runlog.Record{Type: "step", Epoch: s.Epoch + 1, Step: s.Step, Loss: runlog.F(lastLoss),
					Accuracy: runlog.F(sum[1] / sum[2]), LR: runlog.F(lr), SamplesPerSecond: runlog.F(lastSps), GradientWaitMs: runlog.F(waitMs)})
				if r.met != nil {
					r.met.loss.WithLabelValues("train").Set(lastLoss)
					r.met.accuracy.WithLabelValues("train").Set(sum[1] / sum[2])
				}
				window, windowSteps, windowStart = stats{}, 0, time.Now()
			}
			if r.rep.tty {
				sps := float64(s.Step-firstStep) * global / stepTime.Seconds()
				if lastLoss == 0 {
					lastLoss = loss
				}
				r.rep.progress(s.Step, total, s.Epoch+1, c.Epochs, lastLoss, sps,
					time.Duration(float64(total-s.Step)*global/sps*float64(time.Second)))
			}
			if c.PushgatewayEvery > 0 && s.Step%c.PushgatewayEvery == 0 {
				r.pushMetrics()
			}
			// Asynchronous workers meet only at log steps; elsewhere they
			// run at their own pace.
			if c.Strategy != "ps-async" || s.Step%c.LogEvery == 0 {
				if err := r.checkStop(); err != nil {
					return err
				}
			}
			if c.CheckpointDir != "" && c.CheckpointEvery > 0 && s.Step%c.CheckpointEvery == 0 {
				if err := r.checkpoint(); err != nil {
					return err
				}
			}
		}
		if s.StepInEpoch < spe {
			break // stopped by --max-steps or a signal inside the epoch
		}
		if r.bench == nil {
			if err := r.endEpoch(&epochStats, time.Since(epochStart)); err != nil {
				return err
			}
		}
		s.Epoch++
		s.StepInEpoch = 0
		epochStats, epochStart = stats{}, time.Now()
	}
	if r.bench != nil {
		r.bench.end(s.Step - firstStep)
	}
	if s.StepInEpoch > 0 && r.stopBy == "" && r.bench == nil { // a stopped job has no time for an evaluation
		if err := r.endEpoch(&epochStats, time.Since(epochStart)); err != nil {
			return err
		}
	}
	if c.CheckpointDir != "" && r.lastSaved != s.Step {
		if err := r.checkpoint(); err != nil {
			return err
		}
	}
	if err := r.syncBuffers(); err != nil {
		return err
	}
	r.prog.enter(opReplicaCheck)
	sum, err := verifyReplicas(r.w, p.Data, p.Buffers)
	r.prog.leave()
	if err != nil {
		return err
	}
	if n := s.Step - firstStep; n > 0 {
		waitTime += r.sync.takeWaiting()
		sps := float64(n) * global / stepTime.Seconds()
		r.rep.record(runlog.Record{Type: "done", Step: s.Step, SamplesPerSecond: runlog.F(sps)})
		r.rep.say("throughput: %d steps x %d samples in %.2f s of training steps: %.0f samples/s, %.1f GFLOP/s per rank; %.2f ms per step, %.2f ms of it waiting for gradients (rank 0)\n",
			n, int(global), stepTime.Seconds(), sps, sps*float64(flopsPerSample)/float64(r.w.Size())/1e9,
			stepTime.Seconds()*1e3/float64(n), waitTime.Seconds()*1e3/float64(n))
	}
	if r.stopBy != "" {
		saved := "no --checkpoint-dir: nothing saved"
		if c.CheckpointDir != "" {
			saved = fmt.Sprintf("checkpoint written to %s; continue with --resume", c.CheckpointDir)
		}
		r.rep.say("stopped by %s at step %d: %s\n", r.stopBy, s.Step, saved)
	}
	r.rep.say("done: step %d, parameters identical on all %d rank(s) (crc32c %08x)\n", s.Step, r.w.Size(), sum)
	r.pushMetrics()
	if c.Plot != "" && r.w.Rank() == 0 {
		recs := r.rep.records
		if c.Resume && c.LogFile != "" {
			// The log holds the runs before this one too: plot them all.
			if all, err := runlog.ReadFile(c.LogFile); err == nil {
				recs = all
			}
		}
		if err := runlog.Plot(recs, c.Plot, 1200, 900); err != nil {
			fmt.Fprintf(r.errw, "train: rank 0: --plot %s: %v\n", c.Plot, err)
		} else {
			r.rep.say("plot: %s\n", c.Plot)
		}
	}
	return nil
}

// traceStep writes one step's spans to the timeline: the step, and its
// phases nested in it, one after the other.
func (r *run) traceStep(st *stepTimes, step int, took time.Duration) {
	if r.tl == nil {
		return
	}
	r.tl.span("step", tidTraining, st.start, took, map[string]any{"step": step})
	t := st.start
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{phaseData, st.data}, {phaseForward, st.forward}, {phaseBackward, st.backward}, {phaseWait, st.wait}, {phaseOptimizer, st.optimize}} {
		r.tl.span(p.name, tidTraining, t, p.d, nil)
		t = t.Add(p.d)
	}
}

// step trains on one batch (x, y) at learning rate lr: forward, loss,
// backward with the gradient allreduce overlapped, clipping, update,
// timing each part into st (st.start and st.data are the caller's). It
// returns this rank's mean loss and correct count.
func (r *run) step(x []float32, y []int32, lr float64, st *stepTimes) (float64, int, error) {
	p := r.model.Params
	b := len(y)
	// Each phase ends where the next begins, so the phases tile the step
	// on the timeline: one clock reading per boundary.
	t := st.start.Add(st.data)
	lap := func() time.Duration {
		now := time.Now()
		d := now.Sub(t)
		t = now
		return d
	}
	if r.gpu != nil {
		loss, correct, finite, err := r.gpuStep(x, y, lr, st, lap)
		if err != nil {
			return 0, 0, err
		}
		st.optimize = lap()
		if !finite {
			return 0, 0, r.notFinite(loss)
		}
		return loss, correct, nil
	}
	if !r.psHeld {
		clear(p.Grad) // else ps-async sums the gradients of the steps until its next push
	}
	r.sync.begin()
	logits := r.model.Forward(x, b)
	loss, correct := model.SoftmaxCrossEntropy(r.model.LossGrad(b), logits, y, b, r.model.Classes())
	if r.fault.is("nan", r.w.Rank(), r.state.Step) {
		r.model.LossGrad(b)[0] = float32(math.NaN())
	}
	st.forward = lap()
	r.model.Backward(b) // starts the allreduce of finished buckets
	st.backward = lap()
	r.prog.enter(opGradients)
	err := r.sync.finish()
	r.prog.leave()
	if err != nil {
		return 0, 0, err
	}
	st.wait = lap()
	if r.bnErr != nil {
		return 0, 0, r.bnErr
	}
	if r.cfg.ClipGradNorm > 0 {
		optim.ClipGradNorm(p.Grad, r.cfg.ClipGradNorm)
	}
	var finite bool
	if r.ps != nil {
		t := r.state.Step + 1
		push := t%r.cfg.PSPushEvery == 0
		pull := t%r.cfg.PSFetchEvery == 0
		r.psHeld, r.psLR = !push, lr
		r.prog.enter(opGradients)
		err := r.ps.exchange(p.Data, p.Grad, lr, t, push, pull)
		r.prog.leave()
		if err != nil {
			return 0, 0, err
		}
		finite, st.wait = true, st.wait+lap() // the servers check their updates
	} else {
		finite = r.opt.Step(p.Data, p.Grad, float32(lr), r.state.Step+1)
	}
	st.optimize = lap()
	if !finite {
		return 0, 0, r.notFinite(loss)
	}
	return loss, correct, nil
}

// notFinite is the error of a step whose gradients were not finite.
// Every rank applied the same averaged gradient, so every rank sees this
// at the same step: an agreed stop, and no checkpoint of the spoilt
// parameters.
func (r *run) notFinite(loss float64) error {
	kept := "no checkpoint was written"
	if r.lastSaved >= 0 {
		kept = fmt.Sprintf("the last checkpoint, step %d, is kept", r.lastSaved)
	}
	return &JobError{Rank: 0, Own: r.w.Rank() == 0, Err: fmt.Errorf(
		"step %d: the gradients are not finite (NaN or Inf; loss %.4g on rank 0): training stopped, %s; lower --lr or set --clip-grad-norm",
		r.state.Step, loss, kept)}
}

// checkStop ends training at this step on every rank if a signal reached
// any rank: the ranks agree with a one-value allreduce.
func (r *run) checkStop() error {
	flag := []int64{r.signals.received()}
	r.prog.enter(opStopCheck)
	err := r.w.AllreduceInt64(flag, mpi.Max)
	r.prog.leave()
	if err != nil {
		return err
	}
	if flag[0] != 0 {
		r.stopBy = syscall.Signal(flag[0]).String()
		if name, ok := sigNames[syscall.Signal(flag[0])]; ok {
			r.stopBy = name
		}
	}
	return nil
}

var sigNames = map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGUSR1: "SIGUSR1"}

// average makes the replicas one again under local SGD: parameters and
// optimizer state become their mean over the ranks (the state too, so that
// every sync point, checkpoints included, leaves identical replicas and a
// resume is exact). A no-op while no local step was taken since the last.
func (r *run) average() error {
	if !r.diverged {
		return nil
	}
	r.prog.enter(opAverage)
	defer r.prog.leave()
	if err := r.reduce(r.model.Params.Data, mpi.Mean); err != nil {
		return err
	}
	st := r.opt.State()
	for _, name := range slices.Sorted(maps.Keys(st)) { // the same order on every rank
		if err := r.reduce(st[name], mpi.Mean); err != nil {
			return err
		}
	}
	r.diverged = false
	return nil
}

// syncBuffers makes the model's buffers identical on every rank before
// they are evaluated or saved. With synchronised BatchNorm they already
// are; with --bn local each rank kept its own running statistics, and
// their mean across ranks is taken (the integer batch counters agree by
// construction and are left alone). Under local SGD the parameters are
// averaged first.
func (r *run) syncBuffers() error {
	if r.gpu != nil {
		if err := r.gpu.toHost(); err != nil {
			return err
		}
	}
	if err := r.average(); err != nil {
		return err
	}
	if r.ps != nil && r.cfg.Strategy == "ps-async" {
		// Gradients summed since the last push (--push-every) go now.
		if r.psHeld {
			if err := r.ps.exchange(nil, r.model.Params.Grad, r.psLR, r.state.Step, true, false); err != nil {
				return err
			}
			r.psHeld = false
		}
		// Every worker has its answers for all it pushed once all are here;
		// then the servers' parameters are final for now.
		if err := r.w.Barrier(); err != nil {
			return err
		}
		if err := r.ps.fetch(r.model.Params.Data); err != nil {
			return err
		}
	}
	if r.cfg.BN == "sync" {
		return nil
	}
	p := r.model.Params
	for _, t := range p.BufferTensors {
		if !t.Int64 {
			if err := r.w.AllreduceFloat32(t.Of(p.Buffers), mpi.Mean); err != nil {
				return err
			}
		}
	}
	if r.gpu != nil {
		return r.gpu.net.B.Upload(p.Buffers)
	}
	return nil
}

// endEpoch evaluates the test set across ranks and logs the epoch (or the
// part of it that ran).
func (r *run) endEpoch(train *stats, took time.Duration) error {
	if err := r.syncBuffers(); err != nil {
		return err
	}
	start := time.Now()
	test, err := r.evaluate()
	if err != nil {
		return err
	}
	r.tl.span("evaluate", tidTraining, start, time.Since(start), nil)
	sum := []float64{train.loss, train.correct, train.count, test.loss, test.correct, test.count}
	r.prog.enter(opEvaluation)
	err = r.w.AllreduceFloat64(sum, mpi.Sum)
	r.prog.leave()
	if err != nil {
		return err
	}
	s := &r.state
	what := "done"
	if s.StepInEpoch < r.sampler.StepsPerEpoch() {
		what = "stopped"
	}
	r.rep.say("epoch %d/%d %s step %d: train loss %.4f acc %.2f%%, test loss %.4f acc %.2f%%, %.1f s\n",
		s.Epoch+1, r.cfg.Epochs, what, s.Step, sum[0]/sum[2], 100*sum[1]/sum[2], sum[3]/sum[5], 100*sum[4]/sum[5], took.Seconds())
	r.rep.record(runlog.Record{Type: "epoch", Epoch: s.Epoch + 1, Step: s.Step,
		TrainLoss: runlog.F(sum[0] / sum[2]), TrainAccuracy: runlog.F(sum[1] / sum[2]),
		TestLoss: runlog.F(sum[3] / sum[5]), TestAccuracy: runlog.F(sum[4] / sum[5]), Seconds: runlog.F(took.Seconds())})
	if r.met != nil {
		r.met.epoch.Set(float64(s.Epoch + 1))
		r.met.loss.WithLabelValues("test").Set(sum[3] / sum[5])
		r.met.accuracy.WithLabelValues("test").Set(sum[4] / sum[5])
	}
	return nil
}

// evaluate runs this rank's shard of the test set in evaluation mode
// (BatchNorm on its running statistics). Only the GPU path can fail.
func (r *run) evaluate() (stats, error) {
	r.model.Mode.Training = false
	defer func() { r.model.Mode.Training = true }()
	idx := data.Shard(r.test.N, r.w.Rank(), r.w.Size())
	eb := r.cfg.EvalBatch
	x := make([]float32, eb*r.test.SampleSize())
	y := make([]int32, eb)
	var st stats
	for lo := 0; lo < len(idx); lo += eb {
		hi := min(lo+eb, len(idx))
		n := hi - lo
		r.test.Batch(x, y, idx[lo:hi])
		if r.gpu != nil {
			if err := r.gpu.net.Forward(x, n); err != nil {
				return st, err
			}
			loss, correct, err := r.gpu.net.Loss(y, n, false)
			if err != nil {
				return st, err
			}
			st.add(loss, correct, n)
			continue
		}
		logits := r.model.Forward(x, n)
		loss, correct := model.SoftmaxCrossEntropy(nil, logits, y, n, r.model.Classes())
		st.add(loss, correct, n)
	}
	return st, nil
}

// checkpoint writes the current state on rank 0 and prunes old files.
func (r *run) checkpoint() error {
	r.lastSaved = r.state.Step
	if err := r.syncBuffers(); err != nil {
		return err
	}
	if r.w.Rank() != 0 {
		return nil
	}
	if r.ps != nil {
		if err := r.ps.fetchState(r.model.Params.Data, r.opt.State()); err != nil {
			return err
		}
	}
	c := &r.cfg
	oc, _ := json.Marshal(c.optimConfig())
	r.state.Meta = map[string]string{
		"seed":         strconv.FormatUint(c.Seed, 10),
		"world_size":   strconv.Itoa(r.w.Size()),
		"batch_size":   strconv.Itoa(c.BatchSize),
		"model":        r.model.Config.String(),
		"optimizer":    string(oc),
		"lr":           strconv.FormatFloat(r.sched.Base, 'g', -1, 64),
		"lr_schedule":  c.LRSchedule,
		"warmup_steps": strconv.Itoa(c.WarmupSteps),
		"batchnorm":    c.BN,
	}
	if r.bucketKept > 0 {
		r.state.Meta["bucket_bytes"] = strconv.Itoa(r.bucketKept)
	}
	start := time.Now()
	if r.fault.is("kill-in-checkpoint", r.w.Rank(), r.state.Step) {
		r.state.WrapFile = killHalfWay
	}
	r.prog.enter(opCheckpoint)
	path, err := checkpoint.Save(c.CheckpointDir, r.model.Params, &r.state)
	r.prog.leave()
	if err != nil {
		return err
	}
	r.tl.span("checkpoint", tidTraining, start, time.Since(start), map[string]any{"step": r.state.Step})
	if r.met != nil {
		r.met.ckptSeconds.Observe(time.Since(start).Seconds())
		r.met.ckptLast.SetToCurrentTime()
	}
	if err := checkpoint.Prune(c.CheckpointDir, c.Keep); err != nil {
		return fmt.Errorf("--keep %d: removing old checkpoints in %s: %v", c.Keep, c.CheckpointDir, err)
	}
	r.rep.say("checkpoint: %s (%.0f ms)\n", path, float64(time.Since(start).Microseconds())/1000)
	return nil
}

// prefetch builds training batches in a goroutine, one step ahead, into
// two alternating buffers: on the GPU path the CPU's augmentation then
// overlaps the device's step instead of preceding it.
type prefetch struct {
	r            *run
	b            int
	xs           [2][]float32
	ys           [2][]int32
	next         int // buffer the next start fills
	epoch, step  int // of the batch in flight; step -1: none
	done         chan struct{}
	bufOfPending int
}

func (r *run) newPrefetch(b int) *prefetch {
	p := &prefetch{r: r, b: b, step: -1}
	for i := range 2 {
		p.xs[i] = make([]float32, b*r.train.SampleSize())
		p.ys[i] = make([]int32, b)
	}
	return p
}

// start builds batch step of epoch (indices idx) in the background.
func (p *prefetch) start(epoch, step int, idx []int) {
	p.wait()
	k := p.next
	p.next = 1 - p.next
	p.epoch, p.step, p.bufOfPending = epoch, step, k
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		p.r.train.BatchAugmented(p.xs[k], p.ys[k], idx[step*p.b:(step+1)*p.b], p.r.augment, epoch)
	}()
}

// wait lets the batch in flight finish.
func (p *prefetch) wait() {
	if p.done != nil {
		<-p.done
	}
}

// get returns batch step of epoch: the prefetched one, or built now.
func (p *prefetch) get(epoch, step int, idx []int) ([]float32, []int32) {
	p.wait()
	if p.step == step && p.epoch == epoch {
		p.step = -1
		return p.xs[p.bufOfPending], p.ys[p.bufOfPending]
	}
	k := p.next
	p.next = 1 - p.next
	p.r.train.BatchAugmented(p.xs[k], p.ys[k], idx[step*p.b:(step+1)*p.b], p.r.augment, epoch)
	return p.xs[k], p.ys[k]
}
