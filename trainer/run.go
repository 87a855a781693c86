package trainer

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"train/data"
	"train/model"
	"train/mpi"
	"train/optim"
)

// SetupHint is appended to a missing-dataset error: how to install it.
const SetupHint = "run scripts/setup.sh (it installs Debian's dataset-fashion-mnist) or pass --data DIR"

// run is one training job on one rank.
type run struct {
	w     *mpi.World
	cfg   Config
	log   io.Writer // rank 0's progress; io.Discard elsewhere
	fault *fault

	train, test *data.Dataset
	model       *model.Model
	opt         *optim.SGD
	sync        *gradSync
	sampler     data.Sampler
	state       State // position; Params and Optim alias the live buffers
	lastSaved   int   // step of the newest checkpoint, -1 if none
}

// Run trains on this rank of w as cfg says, writing progress to log on
// rank 0. It returns nil on every rank or an error: a *JobError when every
// rank knows of the failure (the caller may finalize MPI normally), any
// other error when only this rank does (the caller must abort the job).
func Run(w *mpi.World, cfg Config, log io.Writer) error {
	if w.Rank() != 0 {
		log = io.Discard
	}
	r := &run{w: w, cfg: cfg, log: log, lastSaved: -1}
	if err := agree(w, r.cfg.Validate()); err != nil {
		return err
	}
	r.fault, _ = parseFault(r.cfg.Fault)
	if err := agree(w, r.setup()); err != nil {
		return err
	}
	var err error
	if w.Rank() == 0 {
		err = r.initialState()
	}
	if err := agree(w, err); err != nil {
		return err
	}
	if err := r.broadcastState(); err != nil {
		return err
	}
	defer r.sync.close()
	return r.loop()
}

// setup loads the data, builds the model and optimizer and checks the
// checkpoint directory: everything each rank can get wrong on its own.
func (r *run) setup() error {
	c := &r.cfg
	var err error
	r.train, r.test, err = data.LoadMNIST(c.DataDir)
	if errors.Is(err, data.ErrNotFound) {
		return fmt.Errorf("--data %s: %v: %s", c.DataDir, err, SetupHint)
	}
	if err != nil {
		return err
	}
	r.model, err = model.Build(model.Config{
		Kind:    c.Model,
		Hidden:  c.Hidden,
		Input:   [3]int{r.train.C, r.train.H, r.train.W},
		Classes: r.train.Classes,
	})
	if err != nil {
		return err
	}
	r.sampler = data.Sampler{N: r.train.N, Batch: c.BatchSize, Rank: r.w.Rank(), Size: r.w.Size(), Seed: c.Seed}
	if r.sampler.StepsPerEpoch() == 0 {
		return fmt.Errorf("--batch-size %d: each of the %d ranks' shards holds %d of the %d training samples, fewer than one batch; lower --batch-size",
			c.BatchSize, r.w.Size(), r.train.N/r.w.Size(), r.train.N)
	}
	p := r.model.Params
	reduce := r.w.AllreduceFloat32
	if c.Allreduce == "ring" {
		reduce = r.w.RingAllreduceFloat32
	}
	r.sync = newGradSync(reduce, p.Grad, makeBuckets(p, int(c.BucketMB*(1<<20))), c.Overlap)
	r.model.OnGradReady = r.sync.ready
	r.opt = optim.NewSGD(p.Len(), float32(c.Momentum), float32(c.WeightDecay))
	r.state = State{Params: p.Data, Optim: r.opt.State()}
	if c.CheckpointDir != "" && r.w.Rank() == 0 {
		if err := checkWritable(c.CheckpointDir); err != nil {
			return fmt.Errorf("--checkpoint-dir %s: %v", c.CheckpointDir, err)
		}
	}
	return nil
}

// checkWritable creates dir if needed and proves a file can be made in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("not writable: %v", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// initialState, on rank 0, draws fresh parameters or loads the newest
// checkpoint when --resume asks for it.
func (r *run) initialState() error {
	c := &r.cfg
	r.describe()
	if c.Resume {
		paths, err := ListCheckpoints(c.CheckpointDir)
		if err != nil {
			return fmt.Errorf("--checkpoint-dir %s: %v", c.CheckpointDir, err)
		}
		if len(paths) > 0 {
			return r.resume(paths[len(paths)-1])
		}
		fmt.Fprintf(r.log, "resume: no checkpoint in %s, starting from step 0\n", c.CheckpointDir)
	}
	r.model.Init(c.Seed)
	return nil
}

// resume loads path and checks it was written for this model; a different
// world size or batch size continues at the same point of the epoch,
// counted in samples.
func (r *run) resume(path string) error {
	s := &r.state
	if err := LoadCheckpoint(path, r.model.Params, s); err != nil {
		return fmt.Errorf("%v; move it away to resume from an older checkpoint", err)
	}
	if got, want := s.Meta["model"], r.model.Config.String(); got != want {
		return fmt.Errorf("checkpoint %s was written for model %s, this run builds %s: use the same --model and --hidden", path, got, want)
	}
	oldSize, _ := strconv.Atoi(s.Meta["world_size"])
	oldBatch, _ := strconv.Atoi(s.Meta["batch_size"])
	if g := r.cfg.BatchSize * r.w.Size(); oldSize*oldBatch != g && oldSize > 0 && oldBatch > 0 {
		samples := s.StepInEpoch * oldSize * oldBatch
		s.StepInEpoch = samples / g
		fmt.Fprintf(r.log, "resume: global batch was %d x %d, now %d x %d: continuing epoch %d at sample %d\n",
			oldSize, oldBatch, r.w.Size(), r.cfg.BatchSize, s.Epoch+1, s.StepInEpoch*g)
	}
	if s.StepInEpoch >= r.sampler.StepsPerEpoch() {
		s.Epoch, s.StepInEpoch = s.Epoch+1, 0
	}
	r.lastSaved = s.Step
	fmt.Fprintf(r.log, "resume: %s (step %d, epoch %d)\n", path, s.Step, s.Epoch+1)
	return nil
}

// broadcastState gives every rank rank 0's parameters, optimizer state and
// position.
func (r *run) broadcastState() error {
	s := &r.state
	if err := r.w.BcastFloat32(s.Params, 0); err != nil {
		return err
	}
	// In name order: map order differs between ranks, collectives may not.
	for _, name := range slices.Sorted(maps.Keys(s.Optim)) {
		if err := r.w.BcastFloat32(s.Optim[name], 0); err != nil {
			return err
		}
	}
	pos := []int64{int64(s.Step), int64(s.Epoch), int64(s.StepInEpoch), int64(r.lastSaved)}
	if err := r.w.BcastInt64(pos, 0); err != nil {
		return err
	}
	s.Step, s.Epoch, s.StepInEpoch, r.lastSaved = int(pos[0]), int(pos[1]), int(pos[2]), int(pos[3])
	return nil
}

// describe logs what this job is.
func (r *run) describe() {
	c := &r.cfg
	n := r.w.Size()
	fmt.Fprintf(r.log, "train: %s model, %d parameters; %s: %d training and %d test samples\n",
		c.Model, r.model.Params.Len(), filepath.Base(c.DataDir), r.train.N, r.test.N)
	fmt.Fprintf(r.log, "train: %d rank(s) x batch %d = global batch %d, %d steps per epoch, allreduce %s in %d bucket(s)%s, sgd lr %g (%s, %d warm-up steps) momentum %g weight decay %g\n",
		n, c.BatchSize, n*c.BatchSize, r.sampler.StepsPerEpoch(), c.Allreduce, len(r.sync.buckets), map[bool]string{true: " overlapped with backward", false: ""}[c.Overlap], c.LR, c.LRSchedule, c.WarmupSteps, c.Momentum, c.WeightDecay)
}

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
	b, classes := c.BatchSize, r.model.Classes()
	spe := r.sampler.StepsPerEpoch()
	x := make([]float32, b*r.train.SampleSize())
	y := make([]int32, b)
	sched := optim.Schedule{Kind: c.LRSchedule, Base: c.LR, Warmup: c.WarmupSteps, Total: c.Epochs * spe}
	global := float64(b * r.w.Size())

	var window, epochStats stats
	windowStart, epochStart := time.Now(), time.Now()
	windowSteps := 0
	// Time in training steps alone (no evaluation, logging or
	// checkpoints), for the closing throughput figure.
	var stepTime, waitTime time.Duration
	firstStep := s.Step
	done := func() bool { return c.MaxSteps > 0 && s.Step >= c.MaxSteps }

	for s.Epoch < c.Epochs && !done() {
		idx := r.sampler.Epoch(s.Epoch)
		for s.StepInEpoch < spe && !done() {
			if err := r.fault.fire(r.w.Rank(), s.Step); err != nil {
				return err
			}
			t0 := time.Now()
			r.train.Batch(x, y, idx[s.StepInEpoch*b:(s.StepInEpoch+1)*b])
			clear(p.Grad)
			r.sync.begin()
			logits := r.model.Forward(x, b)
			loss, correct := model.SoftmaxCrossEntropy(r.model.LossGrad(b), logits, y, b, classes)
			r.model.Backward(b) // starts the allreduce of finished buckets
			if err := r.sync.finish(); err != nil {
				return err
			}
			lr := sched.At(s.Step)
			r.opt.Step(p.Data, p.Grad, float32(lr))
			stepTime += time.Since(t0)
			s.Step++
			s.StepInEpoch++
			window.add(loss, correct, b)
			epochStats.add(loss, correct, b)
			windowSteps++

			if s.Step%c.LogEvery == 0 {
				sum := []float64{window.loss, window.correct, window.count}
				if err := r.w.AllreduceFloat64(sum, mpi.Sum); err != nil {
					return err
				}
				el := time.Since(windowStart).Seconds()
				wait := r.sync.takeWaiting()
				waitTime += wait
				fmt.Fprintf(r.log, "epoch %d/%d step %d (%d/%d) loss %.4f acc %.2f%% lr %.4g %.0f samples/s, gradient wait %.2f ms/step\n",
					s.Epoch+1, c.Epochs, s.Step, s.StepInEpoch, spe, sum[0]/sum[2], 100*sum[1]/sum[2], lr,
					float64(windowSteps)*global/el, wait.Seconds()*1e3/float64(windowSteps))
				window, windowSteps, windowStart = stats{}, 0, time.Now()
			}
			if c.CheckpointDir != "" && c.CheckpointEvery > 0 && s.Step%c.CheckpointEvery == 0 {
				if err := r.checkpoint(); err != nil {
					return err
				}
			}
		}
		if s.StepInEpoch < spe {
			break // stopped by --max-steps inside the epoch
		}
		if err := r.endEpoch(&epochStats, time.Since(epochStart)); err != nil {
			return err
		}
		s.Epoch++
		s.StepInEpoch = 0
		epochStats, epochStart = stats{}, time.Now()
	}
	if s.StepInEpoch > 0 {
		if err := r.endEpoch(&epochStats, time.Since(epochStart)); err != nil {
			return err
		}
	}
	if c.CheckpointDir != "" && r.lastSaved != s.Step {
		if err := r.checkpoint(); err != nil {
			return err
		}
	}
	sum, err := verifyReplicas(r.w, p.Data)
	if err != nil {
		return err
	}
	if n := s.Step - firstStep; n > 0 {
		waitTime += r.sync.takeWaiting()
		fmt.Fprintf(r.log, "throughput: %d steps x %d samples in %.2f s of training steps: %.0f samples/s; %.2f ms per step, %.2f ms of it waiting for gradients (rank 0)\n",
			n, int(global), stepTime.Seconds(), float64(n)*global/stepTime.Seconds(),
			stepTime.Seconds()*1e3/float64(n), waitTime.Seconds()*1e3/float64(n))
	}
	fmt.Fprintf(r.log, "done: step %d, parameters identical on all %d rank(s) (crc32c %08x)\n", s.Step, r.w.Size(), sum)
	return nil
}

// endEpoch evaluates the test set across ranks and logs the epoch (or the
// part of it that ran).
func (r *run) endEpoch(train *stats, took time.Duration) error {
	test := r.evaluate()
	sum := []float64{train.loss, train.correct, train.count, test.loss, test.correct, test.count}
	if err := r.w.AllreduceFloat64(sum, mpi.Sum); err != nil {
		return err
	}
	s := &r.state
	what := "done"
	if s.StepInEpoch < r.sampler.StepsPerEpoch() {
		what = "stopped"
	}
	fmt.Fprintf(r.log, "epoch %d/%d %s step %d: train loss %.4f acc %.2f%%, test loss %.4f acc %.2f%%, %.1f s\n",
		s.Epoch+1, r.cfg.Epochs, what, s.Step, sum[0]/sum[2], 100*sum[1]/sum[2], sum[3]/sum[5], 100*sum[4]/sum[5], took.Seconds())
	return nil
}

// evaluate runs this rank's shard of the test set.
func (r *run) evaluate() stats {
	idx := data.Shard(r.test.N, r.w.Rank(), r.w.Size())
	eb := r.cfg.EvalBatch
	x := make([]float32, eb*r.test.SampleSize())
	y := make([]int32, eb)
	var st stats
	for lo := 0; lo < len(idx); lo += eb {
		hi := min(lo+eb, len(idx))
		n := hi - lo
		r.test.Batch(x, y, idx[lo:hi])
		logits := r.model.Forward(x, n)
		loss, correct := model.SoftmaxCrossEntropy(nil, logits, y, n, r.model.Classes())
		st.add(loss, correct, n)
	}
	return st
}

// checkpoint writes the current state on rank 0 and prunes old files.
func (r *run) checkpoint() error {
	r.lastSaved = r.state.Step
	if r.w.Rank() != 0 {
		return nil
	}
	c := &r.cfg
	r.state.Meta = map[string]string{
		"seed":         strconv.FormatUint(c.Seed, 10),
		"world_size":   strconv.Itoa(r.w.Size()),
		"batch_size":   strconv.Itoa(c.BatchSize),
		"model":        r.model.Config.String(),
		"optimizer":    "sgd",
		"lr":           strconv.FormatFloat(c.LR, 'g', -1, 64),
		"lr_schedule":  c.LRSchedule,
		"warmup_steps": strconv.Itoa(c.WarmupSteps),
		"momentum":     strconv.FormatFloat(c.Momentum, 'g', -1, 64),
		"weight_decay": strconv.FormatFloat(c.WeightDecay, 'g', -1, 64),
	}
	start := time.Now()
	path, err := SaveCheckpoint(c.CheckpointDir, r.model.Params, &r.state)
	if err != nil {
		return err
	}
	if err := pruneCheckpoints(c.CheckpointDir, c.Keep); err != nil {
		return fmt.Errorf("--keep %d: removing old checkpoints in %s: %v", c.Keep, c.CheckpointDir, err)
	}
	fmt.Fprintf(r.log, "checkpoint: %s (%.0f ms)\n", path, float64(time.Since(start).Microseconds())/1000)
	return nil
}
