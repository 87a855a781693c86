package trainer

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/push"

	"train/checkpoint"
	"train/data"
	"train/model"
	"train/mpi"
	"train/openblas"
	"train/optim"
	"train/runlog"
)

// SetupHint is appended to a missing-dataset error: how to install it.
const SetupHint = "run scripts/setup.sh (it installs Debian's dataset-fashion-mnist) or pass --data DIR"

// run is one training job on one rank.
type run struct {
	w     *mpi.World
	bn    *mpi.World // synchronised BatchNorm's own communicators; nil with --bn local
	cfg   Config
	rep   *reporter // rank 0's log lines, progress bar and records
	errw  io.Writer // warnings (any rank)
	fault *fault

	met    *metrics // nil with --metrics-addr "" and no --pushgateway
	srv    *http.Server
	pusher *push.Pusher // rank 0 only
	tl     *timeline    // nil without --timeline

	train, test *data.Dataset
	augment     data.Augment
	model       *model.Model
	opt         optim.Optimizer
	sched       optim.Schedule
	sync        *gradSync
	sampler     data.Sampler
	state       checkpoint.State // position; Params, Buffers and Optim alias the live buffers
	lastSaved   int              // step of the newest checkpoint, -1 if none
	bnErr       error            // first failure of a BatchNorm reduction
	blas        string
	prog        progress                      // where this rank is, for the watchdog
	signals     *stopSignals                  // SIGTERM, SIGINT, SIGUSR1: stop at the next step
	stopBy      string                        // the signal that stopped the run, "" if none
	reduce      func([]float32, mpi.Op) error // the --allreduce algorithm
	ps          *psClient                     // ps-sync: the servers
	freePS      func()                        // frees the communicators startPS made
	hier        *mpi.Hier                     // --allreduce hier's communicators; nil otherwise
	gpu         *gpuRun                       // --device cuda; nil on the CPU
	gradReduce  func([]float32, mpi.Op) error // the gradient buckets' allreduce (compressed or not)
	tune        *bucketTuner                  // --bucket-mb auto while it tries sizes; nil otherwise
	bucketKept  int                           // --bucket-mb auto's choice, saved in checkpoints; 0 before
	psHeld      bool                          // ps-async: p.Grad holds gradients not pushed yet (--push-every)
	psLR        float64                       // the learning rate of the last step, for a held push
	bench       *benchCounters                // `train bench strategies` reads these; nil otherwise
	diverged    bool                          // local-sgd: local steps since the last average
}

// Run trains on this rank of w as cfg says, writing progress to out on
// rank 0 and warnings to errw. It returns nil on every rank or an error:
// a *JobError when every rank knows of the failure (the caller may
// finalize MPI normally), any other error when only this rank does (the
// caller must abort the job).
func Run(w *mpi.World, cfg Config, out, errw io.Writer) error {
	r := &run{w: w, cfg: cfg, rep: quiet(), errw: errw, lastSaved: -1}
	return r.job(out)
}

// job is Run's body, on the run r.
func (r *run) job(out io.Writer) error {
	w := r.w
	errw := r.errw
	if err := agree(w, r.cfg.Validate()); err != nil {
		return err
	}
	var err error
	if w.Rank() == 0 {
		r.rep, err = newReporter(out, r.cfg.LogFile, r.cfg.Resume, r.cfg.Progress, r.cfg.Plot != "")
	}
	if err := agree(w, err); err != nil {
		return err
	}
	defer r.rep.close()
	r.fault, _ = parseFault(r.cfg.Fault)
	err = r.setup()
	if r.hier != nil {
		defer r.hier.Free()
	}
	if err := agree(w, err); err != nil {
		return err
	}
	if err := r.observe(); err != nil {
		return err
	}
	defer r.closeObservers()
	if r.cfg.BN == "sync" && w.Size() > 1 { // one rank: its own statistics are the global ones
		var err error
		if r.bn, err = w.Dup(); err != nil {
			return err
		}
		defer r.bn.Free()
		r.model.Mode.Reduce = r.reduceBN
	}
	if r.cfg.StallWarn > 0 && w.Size() > 1 {
		wd, err := w.Dup()
		if err != nil {
			return err
		}
		d := startWatchdog(wd, &r.prog, r.cfg.StallWarn, r.cfg.StallTimeout, errw)
		defer d.close()
	}
	// A signal stops training at the next step on every rank (a one-value
	// allreduce per step agrees on it), with a checkpoint.
	r.signals = watchSignals()
	defer r.signals.stop()
	if w.Rank() == 0 {
		err = r.initialState()
	}
	if err := agree(w, err); err != nil {
		return err
	}
	if err := r.broadcastState(); err != nil {
		return err
	}
	defer func() { r.sync.close() }() // the one in use at the end (--bucket-mb auto replaces it)
	if r.cfg.BucketAuto && r.cfg.Strategy == "allreduce" && w.Size() > 1 {
		if err := r.startBucketTuner(); err != nil {
			return err
		}
	}
	if strings.HasPrefix(r.cfg.Strategy, "ps-") {
		server, err := r.startPS()
		if err := agree(w, err); err != nil {
			return err
		}
		if r.freePS != nil {
			defer r.freePS()
		}
		if server {
			return r.serve()
		}
		if err := r.loop(); err != nil {
			return err
		}
		if err := r.ps.stop(); err != nil {
			return err
		}
		if r.ps.served != nil { // colocated: this rank's server ends once every worker stopped
			return <-r.ps.served
		}
		return nil
	}
	return r.loop()
}

// reduceBN sums synchronised BatchNorm's per-channel statistics over all
// ranks. Layers cannot return errors; the first failure is kept and
// reported after the pass (the values are then meaningless, and the step
// is abandoned).
func (r *run) reduceBN(buf []float64) {
	r.prog.enter(opBatchNorm)
	defer r.prog.leave()
	if err := r.bn.AllreduceFloat64(buf, mpi.Sum); err != nil && r.bnErr == nil {
		r.bnErr = fmt.Errorf("synchronised BatchNorm: %w", err)
	}
}

// setup loads the data, builds the model and optimizer and checks the
// checkpoint directory: everything each rank can get wrong on its own.
func (r *run) setup() error {
	c := &r.cfg
	r.blas = r.loadBLAS()
	var err error
	r.train, r.test, err = data.Load(data.Source{Dir: c.DataDir, SyntheticShape: c.SyntheticShape, SyntheticSamples: c.SyntheticSamples, Seed: c.Seed})
	if errors.Is(err, data.ErrNotFound) {
		return fmt.Errorf("--data %s: %v: %s", c.DataDir, err, SetupHint)
	}
	if err != nil {
		return err
	}
	crop, flip, _ := c.augment()
	r.augment = data.Augment{Flip: flip, Seed: c.Seed}
	if crop {
		r.augment.Pad = c.CropPad
	}
	r.model, err = model.Build(model.Config{
		Kind:    c.Model,
		Hidden:  c.Hidden,
		Depth:   c.Depth,
		Input:   [3]int{r.train.C, r.train.H, r.train.W},
		Classes: r.train.Classes,
	})
	if err != nil {
		return err
	}
	if c.Model != "resnet" {
		r.model.Config.Depth = 0
	}
	r.sampler = data.Sampler{N: r.train.N, Batch: c.BatchSize, Rank: r.w.Rank(), Size: r.w.Size(), Seed: c.Seed}
	spe := r.sampler.StepsPerEpoch()
	if spe == 0 {
		return fmt.Errorf("--batch-size %d: each of the %d ranks' shards holds %d of the %d training samples, fewer than one batch; lower --batch-size",
			c.BatchSize, r.w.Size(), r.train.N/r.w.Size(), r.train.N)
	}
	lr := c.LR
	if c.LRScaling == "linear" {
		lr *= float64(r.w.Size())
	}
	r.sched = optim.Schedule{Kind: c.LRSchedule, Base: lr, Warmup: c.WarmupSteps, Total: c.Epochs * spe,
		StepSize: c.LRStepEpochs * spe, Gamma: c.LRGamma}
	p := r.model.Params
	reduce := r.w.AllreduceFloat32
	switch c.Allreduce {
	case "ring":
		reduce = r.w.RingAllreduceFloat32
	case "hier":
		if r.hier, err = r.w.NewHier(); err != nil {
			return err
		}
		reduce = r.hier.AllreduceFloat32
	}
	r.reduce = reduce
	if comp, _ := mpi.ParseCompression(c.Compress); comp != mpi.None {
		// Gradients only (Validate allows it with --strategy allreduce):
		// 16-bit floats on the wire, reduced in float32.
		if r.hier != nil {
			r.hier.Compress = comp
		} else {
			reduce = func(b []float32, op mpi.Op) error { return r.w.RingAllreduceCompressed(b, op, comp) }
		}
	}
	buckets := makeBuckets(p, int(c.BucketMB*(1<<20)))
	if c.Strategy != "allreduce" {
		buckets = nil // local-sgd averages replicas; ps-sync goes through servers
	}
	r.gradReduce = reduce
	r.sync = newGradSync(reduce, p.Grad, buckets, c.Overlap)
	r.model.OnGradReady = r.sync.ready
	if r.opt, err = optim.New(c.optimConfig(), p.Len()); err != nil {
		return err
	}
	r.state = checkpoint.State{Params: p.Data, Buffers: p.Buffers, Optim: r.opt.State()}
	if c.Device == "cuda" {
		if err := r.setupGPU(); err != nil {
			return err
		}
	}
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
		paths, err := checkpoint.List(c.CheckpointDir)
		if err != nil {
			return fmt.Errorf("--checkpoint-dir %s: %v", c.CheckpointDir, err)
		}
		// Newest first; a checkpoint that fails its checks (torn, flipped
		// bits, another model) is skipped with a warning naming it.
		var bad []string
		for i := len(paths) - 1; i >= 0; i-- {
			err := r.resume(paths[i])
			if err == nil {
				r.recordStart()
				return nil
			}
			fmt.Fprintf(r.errw, "train: warning: %v; trying an older checkpoint\n", err)
			bad = append(bad, paths[i])
		}
		if len(bad) > 0 {
			return fmt.Errorf("--resume: none of the %d checkpoints in %s is valid (newest: %s); move them away to start afresh", len(bad), c.CheckpointDir, bad[0])
		}
		r.rep.say("resume: no checkpoint in %s, starting from step 0\n", c.CheckpointDir)
	}
	r.model.Init(c.Seed)
	r.recordStart()
	return nil
}

// recordStart writes the log's start record, at the step training starts
// from.
func (r *run) recordStart() {
	c := &r.cfg
	name := c.modelName()
	n := r.w.Size()
	r.rep.record(runlog.Record{Type: "start", Step: r.state.Step, Model: name, Params: r.model.Params.Len(), WorldSize: n, Batch: n * c.BatchSize,
		SlurmJob: os.Getenv("SLURM_JOB_ID"), Restart: os.Getenv("SLURM_RESTART_COUNT")})
}

// resume loads path and checks it was written for this model; a different
// world size or batch size continues at the same point of the epoch,
// counted in samples.
func (r *run) resume(path string) error {
	s := &r.state
	if err := checkpoint.Load(path, r.model.Params, s); err != nil {
		return err
	}
	if got, want := s.Meta["model"], r.model.Config.String(); got != want {
		return fmt.Errorf("checkpoint %s was written for model %s, this run builds %s: use the same --model, --hidden and --depth", path, got, want)
	}
	oldSize, _ := strconv.Atoi(s.Meta["world_size"])
	oldBatch, _ := strconv.Atoi(s.Meta["batch_size"])
	// The split into workers and servers comes after this broadcast.
	trainers := r.cfg.trainers(r.w.Size())
	spe := data.Sampler{N: r.train.N, Batch: r.cfg.BatchSize, Size: max(trainers, 1)}.StepsPerEpoch()
	if g := r.cfg.BatchSize * trainers; oldSize*oldBatch != g && oldSize > 0 && oldBatch > 0 && g > 0 {
		samples := s.StepInEpoch * oldSize * oldBatch
		s.StepInEpoch = samples / g
		r.rep.say("resume: global batch was %d x %d, now %d x %d: continuing epoch %d at sample %d\n",
			oldSize, oldBatch, trainers, r.cfg.BatchSize, s.Epoch+1, s.StepInEpoch*g)
	}
	if s.StepInEpoch >= spe {
		s.Epoch, s.StepInEpoch = s.Epoch+1, 0
	}
	r.lastSaved = s.Step
	r.rep.say("resume: %s (step %d, epoch %d)\n", path, s.Step, s.Epoch+1)
	return nil
}

// broadcastState gives every rank rank 0's parameters, buffers, optimizer
// state and position.
func (r *run) broadcastState() error {
	r.prog.enter(opBroadcast)
	defer r.prog.leave()
	s := &r.state
	if err := r.w.BcastFloat32(s.Params, 0); err != nil {
		return err
	}
	if err := r.w.BcastFloat32(s.Buffers, 0); err != nil {
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
	name := c.modelName()
	_, flops := r.model.FLOPs()
	r.rep.say("train: %s model, %d parameters, %.1f MFLOP per training sample; %s: %d training and %d test samples of %dx%dx%d\n",
		name, r.model.Params.Len(), float64(flops)/1e6, r.train.Name, r.train.N, r.test.N, r.train.C, r.train.H, r.train.W)
	overlap := ""
	if c.Overlap {
		overlap = " overlapped with backward"
	}
	bn := ""
	if len(r.model.Params.BufferTensors) > 0 {
		bn = ", batchnorm " + c.BN
	}
	ar := c.Allreduce
	if r.hier != nil {
		ar = fmt.Sprintf("hier (%d hosts)", r.hier.Hosts())
	}
	if c.Compress != "none" {
		ar += ", " + c.Compress + " on the wire"
	}
	if r.gpu != nil {
		how := " of the whole gradient after backward"
		if r.gpu.ring != nil {
			ar += " over " + map[string]string{"ipc": "CUDA IPC", "host": "pinned host buffers"}[r.gpu.ring.Transport()]
			how = fmt.Sprintf(" in %d bucket(s)%s", len(r.sync.buckets), overlap)
		}
		r.rep.say("train: %d rank(s) x batch %d = global batch %d, %d steps per epoch, allreduce %s%s%s; GPU, %s\n",
			n, c.BatchSize, n*c.BatchSize, r.sampler.StepsPerEpoch(), ar, how, bn, cmp.Or(c.Precision, "fp32"))
	} else {
		r.rep.say("train: %d rank(s) x batch %d = global batch %d, %d steps per epoch, allreduce %s in %d bucket(s)%s%s; %s\n",
			n, c.BatchSize, n*c.BatchSize, r.sampler.StepsPerEpoch(), ar, len(r.sync.buckets), overlap, bn, r.blas)
	}
	if id := os.Getenv("SLURM_JOB_ID"); id != "" {
		r.rep.say("train: slurm job %s, restart %s\n", id, cmp.Or(os.Getenv("SLURM_RESTART_COUNT"), "0"))
	}
	oc, _ := json.Marshal(c.optimConfig())
	r.rep.say("train: optimizer %s, lr %g (%s schedule, %d warm-up steps, scaling %s), augment %s\n",
		oc, r.sched.Base, c.LRSchedule, c.WarmupSteps, c.LRScaling, augmentName(r.augment))
}

func augmentName(a data.Augment) string {
	switch {
	case a.Pad > 0 && a.Flip:
		return fmt.Sprintf("crop (pad %d) and flip", a.Pad)
	case a.Pad > 0:
		return fmt.Sprintf("crop (pad %d)", a.Pad)
	case a.Flip:
		return "flip"
	}
	return "none"
}

// loadBLAS puts OpenBLAS behind the model's matrix products, with threads
// from --threads or the cores this rank may use, and describes the
// outcome; without the library the pure-Go gonum BLAS stays.
func (r *run) loadBLAS() string {
	threads := r.cfg.Threads
	if threads == 0 {
		threads = coresPerRank(r.w.LocalSize())
	}
	// TRAIN_OPENBLAS names another build of the library (a path or a
	// soname); a name that does not load keeps gonum.
	info, err := openblas.Load(os.Getenv("TRAIN_OPENBLAS"), threads)
	if err != nil {
		return fmt.Sprintf("blas: gonum (pure Go; %v)", err)
	}
	return fmt.Sprintf("blas: OpenBLAS %s, %d thread(s) per rank", info.Core, info.Threads)
}
