package trainer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"train/checkpoint"
	"train/data"
	"train/model"
	"train/mpi"
	"train/openblas"
	"train/optim"
	"train/params"
)

// SetupHint is appended to a missing-dataset error: how to install it.
const SetupHint = "run scripts/setup.sh (it installs Debian's dataset-fashion-mnist) or pass --data DIR"

// Session is one training job on one rank, built by NewSession the same
// way for every use: training (Run), train bench step, train bench
// strategies and train init. It holds what the loop reads and writes (the
// world, the data, the model and its optimizer, the schedule, the sampler
// and the position) and the three kinds of unit the loop drives: an
// Executor (the device's arithmetic), a Strategy (how replicas stay in
// step) and Hooks (what watches the run).
type Session struct {
	// W is the ranks that train together as replicas (the workers, under
	// parameter servers; on a model-parallel grid, the D replicas of this
	// rank's part); Job is every rank the loop runs on (all of the job's,
	// but the parameter servers'), for the sums and agreements of the
	// whole run.
	W, Job  *mpi.World
	grid    *mpi.Grid // --pipeline, --tensor-parallel: this rank's communicators; nil without
	Cfg     Config
	Model   *model.Model
	Opt     optim.Optimizer
	optCfg  optim.Config   // what Opt was made from (parameter servers make their shards' from it)
	Sched   optim.Schedule // over samples
	Sampler data.Sampler
	plan    epochPlan        // Sampler, or tar shards' stream (plan.go)
	State   checkpoint.State // the position; Params, Buffers and Optim alias the live buffers

	trainSet, testSet source // what the run trains and evaluates on (source.go)
	dataName          string // for the log
	tokenizer         string // the token data's (gpt2, bytes), saved in checkpoints

	exec     Executor
	stepSent int64         // bytes this rank sent point to point inside steps (the ring's), for zeroReport
	zero     *zeroExecutor // --zero: the executor, for the state it shards (state_zero.go); nil without
	strategy Strategy
	hooks    []Hook

	rep         *reporter // rank 0's log lines and records; other ranks' writes nothing
	errw        io.Writer // warnings, any rank
	fault       *fault
	augment     data.Augment
	augmentDesc string       // image folders' augmentation, for the log ("": augment's)
	badImages   atomic.Int64 // --skip-bad: images skipped on this rank (train_bad_images_total)
	blas        string
	met         *metrics     // the metrics hook's, for the Pushgateway hook; nil without one
	bn          *bnSync      // synchronised BatchNorm; nil otherwise
	prog        progress     // where this rank is, for the watchdog
	flight      *flightBox   // the flight recorder and its dumps; nil when off
	signals     *stopSignals // SIGTERM, SIGINT, SIGUSR1: stop at the next step
	stopBy      string       // the signal that stopped the run, "" if none
	lastSaved   int          // step of the newest checkpoint, -1 if none
	stale       bool         // BatchNorm buffers stepped since they were last averaged (--bn local)
	serving     bool         // this rank is a parameter server: Train serves
	evaluate    bool         // evaluate at epoch ends (bench runs do not)
	undo        []func()     // what Close undoes, in reverse

	cuts       []int    // the pipeline's: the first layer of each stage
	layerNames []string // the whole network's layers, for the log
	tensorErr  error    // the first failed sum over tensor-parallel shards (layers cannot return it)

	benchBatches *batches // Steps' batch source and its order (benchapi.go)
	benchOrder   []int
}

// Options are how a Session is used, beside its Config.
type Options struct {
	Out, Err io.Writer // rank 0's log lines; warnings from any rank
	// Bench: no evaluation, and the initial parameters are drawn (never
	// resumed): train bench step and strategies.
	Bench bool
	// Local builds the data, model and optimizer only, without MPI (w may
	// be nil): train init.
	Local bool
}

// Run trains on this rank of w as cfg says, writing progress to out on
// rank 0 and warnings to errw. It returns nil on every rank or an error:
// a *JobError when every rank knows of the failure (the caller may
// finalize MPI normally), any other error when only this rank does (the
// caller must abort the job).
func Run(w *mpi.World, cfg Config, out, errw io.Writer) error {
	s, err := NewSession(w, cfg, Options{Out: out, Err: errw})
	if err != nil {
		return err
	}
	defer s.Close()
	defer func() {
		if p := recover(); p != nil {
			s.flight.failed(fmt.Errorf("%v", p), true)
			panic(p)
		}
	}()
	err = s.placed(s.Run())
	var je *JobError
	agreed := errors.As(err, &je)
	s.flight.failed(err, !agreed)
	return err
}

// placed prefixes an error this rank reports with its place on a grid
// ("stage 2 of 4, shard 1 of 2"), so a failed stage or shard is named
// as such, not only by its rank. Errors another rank reported pass as
// they are.
func (s *Session) placed(err error) error {
	g := s.grid
	if err == nil || g == nil {
		return err
	}
	var where []string
	if g.D > 1 {
		where = append(where, fmt.Sprintf("replica %d of %d", g.At.D, g.D))
	}
	if g.P > 1 {
		where = append(where, fmt.Sprintf("stage %d of %d", g.At.P, g.P))
	}
	if g.T > 1 {
		where = append(where, fmt.Sprintf("shard %d of %d", g.At.T, g.T))
	}
	var je *JobError
	if errors.As(err, &je) {
		if je.Own {
			je.Err = fmt.Errorf("%s: %w", strings.Join(where, ", "), je.Err)
		}
		return err
	}
	return fmt.Errorf("%s: %w", strings.Join(where, ", "), err)
}

// NewSession builds this rank's session. Every rank calls it together: it
// agrees on errors (a failure on any rank is a JobError on every rank),
// broadcasts rank 0's initial state (drawn from --seed, or the newest
// checkpoint with --resume) and starts the strategy, which may split the
// world. Close it when done, whatever Run returned.
func NewSession(w *mpi.World, cfg Config, opt Options) (*Session, error) {
	cfg.Defaults()
	s := &Session{W: w, Job: w, Cfg: cfg, rep: quiet(), errw: opt.Err, lastSaved: -1, evaluate: !opt.Bench}
	if s.errw == nil {
		s.errw = io.Discard
	}
	if opt.Local {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		if cfg.Dist.gridded() {
			return nil, fmt.Errorf("--pipeline and --tensor-parallel: train init writes the whole model, which any grid starts from; drop them")
		}
		return s, s.build(0, 1)
	}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := sameOptions(w, cfg.Same); err != nil {
		return nil, err
	}
	if err := Agree(w, cfg.Validate()); err != nil {
		return nil, err
	}
	// The flight recorder starts here, at the same collective on every rank.
	fl, err := startFlight(w, &cfg.Observe, cfg.Checkpoint.Dir, s.errw)
	if err := Agree(w, err); err != nil {
		return nil, err
	}
	if fl != nil {
		s.flight, s.prog.rec = fl, fl.rec
		s.undo = append(s.undo, fl.close)
	} else {
		signal.Ignore(syscall.SIGUSR2) // nothing to dump: not the signal's default, which ends the process
	}
	if w.Rank() == 0 && opt.Out != nil {
		o := &cfg.Observe
		s.rep, err = newReporter(opt.Out, o.LogFile, cfg.Checkpoint.Resume, o.Progress, o.Job.Launcher, o.Plot)
		if err == nil {
			s.undo = append(s.undo, func() { s.rep.close() })
		}
	}
	if err := Agree(w, err); err != nil {
		return nil, err
	}
	s.fault, _ = parseFault(cfg.Fault)
	if err := s.splitGrid(); err != nil {
		return nil, err
	}
	if err := Agree(w, s.build(s.W.Rank(), cfg.trainers(s.W.Size()))); err != nil {
		return nil, err
	}
	// Everything below may talk to the other ranks: every rank reaches it.
	for _, newHook := range hookMakers {
		h, err := newHook(s)
		if err := Agree(w, err); err != nil {
			return nil, err
		}
		if h != nil {
			s.hooks = append(s.hooks, h)
		}
	}
	if err := s.watch(); err != nil {
		return nil, err
	}
	if s.zero != nil { // on a grid too
		err = s.zeroInitialState(opt.Bench)
	} else if s.grid != nil {
		err = s.gridInitialState(opt.Bench)
	} else if w.Rank() == 0 {
		err = s.initialState(opt.Bench)
	}
	if err := Agree(w, err); err != nil {
		return nil, err
	}
	if err := s.broadcastState(); err != nil {
		return nil, err
	}
	st, err := strategies[cfg.Dist.Strategy](s)
	if err := Agree(w, err); err != nil {
		return nil, err
	}
	s.strategy = st
	s.undo = append(s.undo, st.Close)
	s.serving, err = st.Start()
	if err := Agree(w, err); err != nil {
		return nil, err
	}
	if !s.serving {
		s.describe()
		if err := s.syncBN(); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// build is what each rank can get wrong on its own, with no MPI: BLAS, the
// data, the model, the sampler over the d data-parallel ranks (this one
// rank r of them), the schedule, the optimizer, the executor and the
// checkpoint directory.
func (s *Session) build(r, d int) error {
	c := &s.Cfg
	var err error
	if s.blas, err = s.loadBLAS(); err != nil {
		return err
	}
	if err := s.load(); err != nil {
		return err
	}
	if err := c.Data.planBatch(d); err != nil {
		return err
	}
	n := s.trainSet.Len()
	s.Sampler = data.Sampler{N: n, Batch: c.Data.BatchSize, Rank: min(r, d-1), Size: d, Seed: c.Optim.Seed, Ordered: c.Data.Ordered}
	s.plan = s.Sampler
	if t, ok := s.trainSet.(tarImages); ok {
		s.plan = &streamPlan{st: data.Stream{Counts: t.Counts, Seed: c.Optim.Seed, Shuffle: !c.Data.Ordered, Buffer: c.Data.ShuffleBuffer,
			Batch: c.Data.BatchSize, Size: d}, rank: min(r, d-1), set: t.TarSet}
	}
	spe := s.Sampler.StepsPerEpoch()
	if spe == 0 {
		return fmt.Errorf("--batch-size %d: each of the %d data-parallel ranks' shards holds %d of the %d training samples, fewer than one batch; lower --batch-size",
			c.Data.BatchSize, d, n/d, n)
	}
	o := &c.Optim
	lr := o.LR
	if o.LinearScaling {
		lr *= float64(d)
	}
	total := o.Epochs * spe
	if o.DecaySteps > 0 {
		total = o.DecaySteps
	}
	s.Sched = optim.Schedule{Kind: o.Schedule, Base: lr, Warmup: o.WarmupSteps, Total: total,
		StepSize: o.StepEpochs * spe, Gamma: o.Gamma, Batch: int64(d * c.Data.BatchSize)}
	s.optCfg = o.optimConfig()
	if c.Model.Kind == "gpt" && !o.DecayAll {
		s.optCfg.NoDecay = vectors(s.Model.Params)
	}
	optCfg, optLen := s.optCfg, s.Model.Params.Len()
	if c.Dist.Zero > 0 { // ZeRO: the state of this rank's shard only
		lo, hi := shardOf(optLen, d, r)
		optCfg, optLen = optCfg.Shard(lo, hi), hi-lo
	}
	if s.Opt, err = optim.New(optCfg, optLen); err != nil {
		return err
	}
	p := s.Model.Params
	s.State = checkpoint.State{Params: p.Data, Buffers: p.Buffers, Optim: s.Opt.State()}
	if s.W == nil { // train init: no device
		return nil
	}
	newExec := executors[c.Device.Device]
	if s.grid != nil {
		newExec = newPipeExecutor
	}
	if s.exec, err = newExec(s); err != nil {
		return err
	}
	s.undo = append(s.undo, s.exec.Close)
	if m := c.Data.MicroBatches; m > 1 && s.grid == nil {
		if s.exec, err = newMicroExecutor(s.exec, m, s.Model.Positions()); err != nil {
			return err
		}
	}
	if c.Dist.Zero > 0 {
		s.zero = newZeroExecutor(s, s.exec, r, d)
		s.exec = s.zero
		s.undo = append(s.undo, s.zero.close)
	}
	if dir := c.Checkpoint.Dir; dir != "" && r == 0 {
		if err := checkWritable(dir); err != nil {
			return fmt.Errorf("--checkpoint-dir %s: %v", dir, err)
		}
	}
	return nil
}

// splitGrid puts the ranks on the grid --pipeline and --tensor-parallel
// ask for: the strategy then works among the replicas of this rank's part
// (s.W), the rest among all of them (s.Job).
func (s *Session) splitGrid() error {
	d := &s.Cfg.Dist
	if !d.gridded() {
		return nil
	}
	shape, err := mpi.NewShape(s.Job.Size(), max(d.Pipeline, 1), max(d.TensorParallel, 1))
	if err := Agree(s.Job, err); err != nil {
		return err
	}
	if s.grid, err = mpi.NewGrid(s.Job, shape); err != nil {
		return err
	}
	s.undo = append(s.undo, func() { s.grid.Free() })
	s.W = s.grid.Data
	g, at := s.grid, s.grid.At
	s.flight.record(g.Data, fmt.Sprintf("data@p%d.t%d", at.P, at.T))
	s.flight.record(g.Pipe, fmt.Sprintf("pipe@d%d.t%d", at.D, at.T))
	s.flight.record(g.Tensor, fmt.Sprintf("tensor@d%d.p%d", at.D, at.P))
	return nil
}

// buildModel builds the network cfg describes, or this rank's part of it
// on a pipeline: the stages cut as --stages says, or balanced by the
// layers' estimated cost. The layout comes first, without storage; the
// buffers are allocated once this machine is known to hold them
// (memfit.go).
func (s *Session) buildModel(cfg model.Config) (*model.Model, error) {
	var part model.Part
	if s.grid != nil {
		whole, err := model.Layout(cfg)
		if err != nil {
			return nil, err
		}
		s.layerNames = whole.LayerNames()
		part = model.Part{Shard: s.grid.At.T, Shards: s.grid.T}
		if s.grid.P > 1 {
			if part.Cuts, err = s.cut(whole); err != nil {
				return nil, err
			}
			part.Stage = s.grid.At.P
		}
		s.cuts = part.Cuts
	}
	m, err := model.LayoutPart(cfg, part)
	if err != nil {
		return nil, err
	}
	if err := s.fits(int64(m.Params.Len())); err != nil {
		return nil, err
	}
	m.Params.Alloc()
	if s.grid != nil && s.grid.T > 1 {
		t := s.grid.Tensor
		m.Mode.TensorReduce = func(b []float32) {
			if err := t.AllreduceFloat32(b, mpi.Sum); err != nil && s.tensorErr == nil {
				s.tensorErr = err
			}
		}
	}
	return m, nil
}

// fits checks that this machine can hold n parameters of this rank's, with
// their gradients and optimizer state (memfit.go).
func (s *Session) fits(n int64) error {
	mi, ok := readMemInfo()
	if !ok {
		return nil
	}
	replicas := 1
	if s.W != nil {
		replicas = s.W.Size()
	}
	mm := modelMemory{n: n, state: optim.StateFloats(s.Cfg.Optim.optimConfig()), zero: s.Cfg.Dist.Zero, replicas: replicas}
	return fitsMemory(mm, s.Cfg.Model.Kind, mi)
}

// cut is where the pipeline's stages start: --stages' counts, or a cut
// balanced by the layers' estimated cost.
func (s *Session) cut(whole *model.Model) ([]int, error) {
	var cuts []int
	var err error
	if st := s.Cfg.Dist.Stages; len(st) > 0 {
		if len(st) != s.grid.P {
			return nil, fmt.Errorf("--stages %s: %d counts for --pipeline %d; give one count of layers per stage", joinInts(st), len(st), s.grid.P)
		}
		cuts, err = whole.CutsOf(st)
	} else {
		cuts, err = whole.Balance(s.grid.P)
	}
	return cuts, err
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// watch starts the stall watchdog (its own communicator) and the stop
// signals.
func (s *Session) watch() error {
	c := &s.Cfg.Dist
	if c.StallWarn > 0 && s.Job.Size() > 1 {
		wd, err := s.Job.Dup()
		if err != nil {
			return err
		}
		d := startWatchdog(wd, &s.prog, c.StallWarn, c.StallTimeout, s.errw, s.flight)
		s.undo = append(s.undo, d.close)
	}
	// A signal stops training at the next step on every rank (a one-value
	// allreduce per step agrees on it), with a checkpoint.
	s.signals = watchSignals()
	s.undo = append(s.undo, s.signals.stop)
	return nil
}

// Close undoes what NewSession set up, in reverse: the strategy's
// communicators, the hooks, the watchdog, the signals, the reporter.
func (s *Session) Close() {
	for _, h := range s.hooks {
		h.Close()
	}
	s.hooks = nil
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// checkWritable creates dir if needed and proves a file can be made in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return probeWritable(dir)
}

// probeWritable proves a file can be made in dir, which must exist: a
// file written only at the end of a run (--plot) is checked at its start.
func probeWritable(dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("no directory %s to write it in", dir)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("directory %s is not writable: %v", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// loadBLAS sizes the model's thread pool from --threads or the cores this
// rank may use, puts OpenBLAS behind the model's matrix products with one
// thread of its own (the pool cuts the products across the threads:
// model/par.c), sets the convolutions' algorithm (--conv) and whether
// the flat buffers ask for huge pages (--zero 2 and 3), and describes
// the outcome; without the library the model's C code multiplies with a
// plain loop of its own. A library --openblas names must load: a build
// the user chose that silently fell back to the plain loop would train
// several times slower ("none" asks for the loop).
func (s *Session) loadBLAS() (string, error) {
	localSize := 1
	if s.W != nil {
		localSize = s.W.LocalSize()
	}
	avail := coresPerRank(localSize)
	threads := s.Cfg.Device.Threads
	if threads == 0 {
		threads = avail
	}
	threads = model.SetThreads(threads)
	model.SetCPUs(avail)
	model.Pin()
	optim.UsePool(model.PoolRanges())
	wino := s.Cfg.Model.Conv == "winograd"
	model.UseWinograd(wino)
	// ZeRO stages 2 and 3 free and fault pages every step (params/huge.go).
	params.UseHugePages(s.Cfg.Dist.Zero >= 2)
	conv := ""
	if wino {
		conv = "; 3x3 convolutions: Winograd F(4x4,3x3)"
	}
	conv += oversubscribed(threads, avail)
	amx := s.Cfg.Device.Gemm == "amx"
	if err := model.UseAMX(amx); err != nil {
		return "", fmt.Errorf("--gemm amx: %v: use --gemm blas", err)
	}
	if amx {
		conv += "; products: AMX, a float as three bf16, six tile products summed in float (--gemm amx)"
	}
	own := s.Cfg.Device.Gemm == "avx512"
	if err := model.UseAVX512(own); err != nil {
		return "", fmt.Errorf("--gemm avx512: %v: use --gemm blas", err)
	}
	if own {
		conv += "; products: our own AVX-512 SGEMM (--gemm avx512)"
	}
	lib := s.Cfg.Device.OpenBLAS
	if lib == "none" {
		return fmt.Sprintf("blas: none, plain C loops (--openblas none), %d thread(s) per rank%s", threads, conv), nil
	}
	info, err := openblas.Load(lib, 1)
	switch {
	case err != nil && lib != "":
		return "", fmt.Errorf("--openblas %s: %v: name a build that loads, or none for the plain C loops", lib, err)
	case err != nil:
		return fmt.Sprintf("blas: none, plain C loops (%v), %d thread(s) per rank%s", err, threads, conv), nil
	}
	core := info.Core
	for _, n := range []string{info.Narrowed(), info.Fallback()} {
		if n != "" {
			core += " (" + n + ")"
		}
	}
	return fmt.Sprintf("blas: OpenBLAS %s, %d thread(s) per rank%s", core, threads, conv), nil
}

// observeBucket tells the hooks that watch buckets of one reduced (from
// the goroutine that reduced it).
func (s *Session) observeBucket(b bucket, start time.Time, d time.Duration, overlapped bool) {
	for _, h := range s.hooks {
		if w, ok := h.(bucketWatcher); ok {
			w.Bucket(b, start, d, overlapped)
		}
	}
}

// pipeWatchers are the hooks that watch a pipeline's operations (none:
// the executor does not time them).
func (s *Session) pipeWatchers() []pipeWatcher {
	var ws []pipeWatcher
	for _, h := range s.hooks {
		if w, ok := h.(pipeWatcher); ok {
			ws = append(ws, w)
		}
	}
	return ws
}

// bucketsChanged tells the hooks the gradient buckets' size cap.
func (s *Session) bucketsChanged(capBytes int) {
	for _, h := range s.hooks {
		if w, ok := h.(bucketSizeWatcher); ok {
			w.BucketBytes(capBytes)
		}
	}
}

// observeStaleness tells the hooks of a push's staleness (ps-async servers).
func (s *Session) observeStaleness(updates int) {
	for _, h := range s.hooks {
		if w, ok := h.(stalenessWatcher); ok {
			w.Staleness(updates)
		}
	}
}

// vectors are the parameters GPT-2's convention does not decay: the
// tensors of one dimension (biases, LayerNorm weights), nanoGPT's
// no-decay group; matrices and embeddings decay.
func vectors(p *model.Params) []optim.Span {
	var spans []optim.Span
	for _, t := range p.Tensors {
		if len(t.Shape) >= 2 {
			continue
		}
		if n := len(spans); n > 0 && spans[n-1].Hi == t.Offset {
			spans[n-1].Hi += t.Size
		} else {
			spans = append(spans, optim.Span{Lo: t.Offset, Hi: t.Offset + t.Size})
		}
	}
	return spans
}
