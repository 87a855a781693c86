package trainer

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"train/gpu"
	"train/model"
	"train/mpi"
	"train/optim"
)

// Config is everything a run is told, in the groups the options come in.
// main parses every choice into its type as it reads the flags (the Parse
// functions below), Defaults fills in what depends on other choices, and
// Validate checks each group on its own and then how they combine. Nothing
// here reads the environment: main does, through the flags' TRAIN_*
// variables.
type Config struct {
	Model      ModelOptions
	Data       DataOptions
	Optim      OptimOptions
	Dist       DistOptions
	Device     DeviceOptions
	Observe    ObserveOptions
	Checkpoint CheckpointOptions
	// Set names the options the user gave (on the command line or in a
	// TRAIN_* variable), by flag name: an option the chosen strategy,
	// optimizer or device would not use is then refused instead of
	// silently ignored. Options left at their defaults are not in it.
	Set map[string]bool
	// Fault, for tests: "RANK:STEP:KIND", see fault.go (TRAIN_FAULT).
	Fault string
}

// ModelOptions choose the network.
type ModelOptions struct {
	Kind   string // mlp, cnn or resnet (model.Build knows them)
	Hidden []int  // MLP hidden layer sizes
	Depth  int    // ResNet depth, 6n+2
}

// DataOptions choose the data and how it is batched.
type DataOptions struct {
	Dir              string // a directory, or "synthetic"
	SyntheticShape   string // CxHxW
	SyntheticSamples int
	Augment          Augment
	CropPad          int
	BatchSize        int // per data-parallel rank
	EvalBatch        int // 0: BatchSize (Defaults)
}

// OptimOptions are the optimizer, its learning-rate schedule, and how long
// training runs (the schedule plans for Epochs).
type OptimOptions struct {
	Optimizer     string // sgd, adam or adamw
	LR            float64
	LinearScaling bool // --lr-scaling linear: LR x data-parallel ranks
	Schedule      string
	WarmupSteps   int
	StepEpochs    int
	Gamma         float64
	Momentum      float64
	Nesterov      bool
	WeightDecay   float64
	Beta1, Beta2  float64
	Eps           float64
	ClipGradNorm  float64 // 0: off
	Epochs        int
	MaxSteps      int // 0: no limit
	Seed          uint64
}

// DistOptions say how ranks share the work and stay in step.
type DistOptions struct {
	Strategy                StrategyKind
	Allreduce               Algorithm       // allreduce, local-sgd
	Compress                mpi.Compression // allreduce with ring or hier
	Buckets                 Buckets         // allreduce
	Overlap                 bool            // allreduce
	SyncEvery               int             // local-sgd
	Servers                 int             // ps-sync, ps-async
	Colocate                bool            // ps-sync, ps-async
	Staleness               int             // ps-async (-1: no bound)
	PushEvery               int             // ps-async (Downpour's n_push)
	FetchEvery              int             // ps-async (Downpour's n_fetch)
	BN                      BNMode          // BNAuto until Defaults
	StallWarn, StallTimeout time.Duration
}

// DeviceOptions say where the arithmetic runs and with which libraries.
type DeviceOptions struct {
	Device    Device
	Precision gpu.Precision // "" until Defaults: fp32
	Threads   int           // BLAS threads per rank; 0: from the cores per local rank
	OpenBLAS  string        // another OpenBLAS build (a path or a soname); "": Debian's
	GPU       gpu.Options   // --device cuda: cuDNN determinism, profiling, libraries
	GPURing   string        // --device cuda --allreduce ring: auto, ipc or host
}

// ObserveOptions say how the run is watched.
type ObserveOptions struct {
	MetricsAddr      string // HOST:PORT; each rank serves PORT + local rank; "": off
	Pushgateway      string // URL; rank 0 pushes every PushgatewayEvery steps and at the end
	PushgatewayEvery int
	Timeline         string // Chrome trace file; each rank writes TimelinePath(Timeline, rank)
	LogFile          string // JSON lines on rank 0
	Plot             string // PNG of the curves, written at the end on rank 0
	Progress         Progress
	LogEvery         int
	Job              Job // where the launcher put us, for logs and metrics
}

// Job is what the environment says of the job: main reads it, so that this
// package reads no environment variables.
type Job struct {
	SlurmJob, SlurmRestart string // SLURM_JOB_ID, SLURM_RESTART_COUNT
	Launcher               string // the variable by which mpirun or srun announced the rank, "" if none
}

// CheckpointOptions say where and when checkpoints are written.
type CheckpointOptions struct {
	Dir    string
	Every  int // steps; 0: only at the end
	Keep   int // checkpoints kept; 0: all
	Resume bool
}

// A choice is an option with a fixed set of spellings; its type's zero
// value is the first of them.
type choice interface {
	~uint8
	names() []string
}

// parseChoice reads flag's value s as one of T's spellings.
func parseChoice[T choice](flag, s string) (T, error) {
	var zero T
	for i, n := range zero.names() {
		if n == s {
			return T(i), nil
		}
	}
	return zero, fmt.Errorf("--%s %q: choose %s", flag, s, orList(zero.names()))
}

func nameOf[T choice](v T) string {
	if n := v.names(); int(v) < len(n) {
		return n[v]
	}
	return fmt.Sprintf("choice(%d)", uint8(v))
}

func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// StrategyKind is --strategy: how replicas stay in step.
type StrategyKind uint8

// The strategies (strategy.go registers their implementations).
const (
	AllreduceStrategy StrategyKind = iota
	LocalSGD
	PSSync
	PSAsync
)

func (StrategyKind) names() []string {
	return []string{"allreduce", "local-sgd", "ps-sync", "ps-async"}
}
func (s StrategyKind) String() string { return nameOf(s) }

// ParseStrategy reads --strategy.
func ParseStrategy(s string) (StrategyKind, error) { return parseChoice[StrategyKind]("strategy", s) }

// servers reports whether the strategy has parameter servers.
func (s StrategyKind) servers() bool { return s == PSSync || s == PSAsync }

// Algorithm is --allreduce: how gradients (or local SGD's replicas) are
// averaged.
type Algorithm uint8

// The allreduce algorithms.
const (
	Ring Algorithm = iota
	MPIAllreduce
	Hier
	NCCL
)

func (Algorithm) names() []string  { return []string{"ring", "mpi", "hier", "nccl"} }
func (a Algorithm) String() string { return nameOf(a) }

// ParseAlgorithm reads --allreduce.
func ParseAlgorithm(s string) (Algorithm, error) { return parseChoice[Algorithm]("allreduce", s) }

// BNMode is --bn: BatchNorm statistics over all ranks or per rank.
type BNMode uint8

// The BatchNorm modes; BNAuto is sync for the strategies that step in
// unison (allreduce, ps-sync) and local for those that do not.
const (
	BNAuto BNMode = iota
	BNSync
	BNLocal
)

func (BNMode) names() []string  { return []string{"auto", "sync", "local"} }
func (b BNMode) String() string { return nameOf(b) }

// ParseBN reads --bn.
func ParseBN(s string) (BNMode, error) { return parseChoice[BNMode]("bn", s) }

// Device is --device.
type Device uint8

// The devices (executor.go registers their executors).
const (
	CPU Device = iota
	CUDA
)

func (Device) names() []string  { return []string{"cpu", "cuda"} }
func (d Device) String() string { return nameOf(d) }

// ParseDevice reads --device.
func ParseDevice(s string) (Device, error) { return parseChoice[Device]("device", s) }

// Progress is --progress: rank 0's live progress bar.
type Progress uint8

// The progress-bar modes: auto shows it on a terminal that no launcher
// gave us.
const (
	ProgressAuto Progress = iota
	ProgressAlways
	ProgressNever
)

func (Progress) names() []string  { return []string{"auto", "always", "never"} }
func (p Progress) String() string { return nameOf(p) }

// ParseProgress reads --progress.
func ParseProgress(s string) (Progress, error) { return parseChoice[Progress]("progress", s) }

// ParsePrecision reads --precision.
func ParsePrecision(s string) (gpu.Precision, error) {
	switch s {
	case "fp32", "tf32", "bf16":
		return gpu.Precision(s), nil
	}
	return "", fmt.Errorf("--precision %q: choose fp32, tf32 or bf16", s)
}

// ParseLRScaling reads --lr-scaling: whether the rate is multiplied by the
// number of data-parallel ranks.
func ParseLRScaling(s string) (bool, error) {
	switch s {
	case "none":
		return false, nil
	case "linear":
		return true, nil
	}
	return false, fmt.Errorf("--lr-scaling %q: choose none or linear", s)
}

// Augment is --augment: which training augmentations run.
type Augment struct {
	Auto       bool // crop and flip for the convolutional networks, nothing for the MLP
	Crop, Flip bool
}

// ParseAugment reads --augment: auto, none, or crop and/or flip.
func ParseAugment(s string) (Augment, error) {
	switch s {
	case "auto":
		return Augment{Auto: true}, nil
	case "none", "":
		return Augment{}, nil
	}
	var a Augment
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "crop":
			a.Crop = true
		case "flip":
			a.Flip = true
		default:
			return Augment{}, fmt.Errorf("--augment %q: want auto, none, or crop and/or flip (comma-separated)", s)
		}
	}
	return a, nil
}

// Buckets is --bucket-mb: the gradient buckets' size cap, or auto.
type Buckets struct {
	MiB  float64 // 0: one bucket
	Auto bool    // try sizes in the first steps, keep the fastest
}

// ParseBuckets reads --bucket-mb: a size in MiB, or auto.
func ParseBuckets(s string) (Buckets, error) {
	if s == "auto" {
		return Buckets{Auto: true}, nil
	}
	v, err := parseFloat(s)
	if err != nil || v < 0 {
		return Buckets{}, fmt.Errorf("--bucket-mb %q: want a size in MiB (0: one bucket) or auto", s)
	}
	return Buckets{MiB: v}, nil
}

func parseFloat(s string) (float64, error) {
	var v float64
	_, err := fmt.Sscan(s, &v)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		err = fmt.Errorf("not finite")
	}
	return v, err
}

// Bytes is the cap in bytes.
func (b Buckets) Bytes() int { return int(b.MiB * (1 << 20)) }

// ModelName names the network for logs: the model, with ResNet's depth.
func (c *Config) ModelName() string {
	if c.Model.Kind == "resnet" {
		return fmt.Sprintf("resnet-%d", c.Model.Depth)
	}
	return c.Model.Kind
}

// trainers is how many of size ranks train: all but the parameter servers
// on ranks of their own.
func (c *Config) trainers(size int) int {
	if c.Dist.Strategy.servers() && !c.Dist.Colocate {
		return size - c.Dist.Servers
	}
	return size
}

// optimConfig is the optimizer part of c, with only the settings the
// chosen optimizer uses.
func (o *OptimOptions) optimConfig() optim.Config {
	c := optim.Config{Name: o.Optimizer, WeightDecay: o.WeightDecay}
	if o.Optimizer == "sgd" {
		c.Momentum, c.Nesterov = o.Momentum, o.Nesterov
	} else {
		c.Beta1, c.Beta2, c.Eps = o.Beta1, o.Beta2, o.Eps
	}
	return c
}

// augment is --augment for the model: auto is crop and flip for the
// convolutional networks and nothing for the MLP.
func (c *Config) augment() (crop, flip bool) {
	a := c.Data.Augment
	if a.Auto {
		return c.Model.Kind != "mlp", c.Model.Kind != "mlp"
	}
	return a.Crop, a.Flip
}

// Defaults fills in the values whose default depends on other options:
// the evaluation batch, BatchNorm's mode and the precision. It changes
// nothing the user set.
func (c *Config) Defaults() {
	if c.Data.EvalBatch == 0 {
		c.Data.EvalBatch = c.Data.BatchSize
	}
	if c.Dist.BN == BNAuto {
		c.Dist.BN = BNSync
		if c.Dist.Strategy == LocalSGD || c.Dist.Strategy == PSAsync {
			// Replicas that step apart have no common batch to take
			// statistics over: each keeps its own, averaged wherever the
			// replicas are (and a synchronised reduction in every layer
			// would put them back in lockstep).
			c.Dist.BN = BNLocal
		}
	}
	if c.Device.Precision == "" {
		c.Device.Precision = "fp32"
	}
}

// Validate checks every group, then the combinations. It changes nothing.
func (c *Config) Validate() error {
	for _, check := range []func() error{c.Model.Validate, c.Data.Validate, c.Optim.Validate, c.Dist.Validate,
		c.Device.Validate, c.Observe.Validate, c.Checkpoint.Validate, c.validateCombinations} {
		if err := check(); err != nil {
			return err
		}
	}
	_, err := parseFault(c.Fault)
	return err
}

// Validate checks the model options.
func (m *ModelOptions) Validate() error {
	if !slices.Contains(model.Kinds, m.Kind) {
		return fmt.Errorf("unknown model %q: choose %s", m.Kind, orList(model.Kinds))
	}
	for _, h := range m.Hidden {
		if h <= 0 {
			return fmt.Errorf("--hidden %v: layer sizes must be positive", m.Hidden)
		}
	}
	if m.Kind == "resnet" && (m.Depth < 8 || (m.Depth-2)%6 != 0) {
		return fmt.Errorf("--depth %d: a CIFAR ResNet has 6n+2 layers (8, 14, 20, 32, 44, 56, 110)", m.Depth)
	}
	return nil
}

// Validate checks the data options.
func (d *DataOptions) Validate() error {
	switch {
	case d.BatchSize <= 0:
		return fmt.Errorf("--batch-size %d: must be positive", d.BatchSize)
	case d.EvalBatch < 0:
		return fmt.Errorf("--eval-batch %d: must not be negative", d.EvalBatch)
	case d.CropPad < 0:
		return fmt.Errorf("--crop-pad %d: must not be negative", d.CropPad)
	case d.Dir == "synthetic" && d.SyntheticSamples <= 0:
		return fmt.Errorf("--synthetic-samples %d: must be positive", d.SyntheticSamples)
	}
	return nil
}

// Validate checks the optimizer, schedule and length.
func (o *OptimOptions) Validate() error {
	switch {
	case o.Epochs <= 0:
		return fmt.Errorf("--epochs %d: must be positive", o.Epochs)
	case o.MaxSteps < 0:
		return fmt.Errorf("--max-steps %d: must be 0 (no limit) or positive", o.MaxSteps)
	case !(o.LR > 0) || math.IsInf(o.LR, 1):
		return fmt.Errorf("--lr %v: must be positive", o.LR)
	case !(o.Momentum >= 0 && o.Momentum < 1):
		return fmt.Errorf("--momentum %v: must be in [0, 1)", o.Momentum)
	case !(o.WeightDecay >= 0):
		return fmt.Errorf("--weight-decay %v: must not be negative", o.WeightDecay)
	case !(o.ClipGradNorm >= 0):
		return fmt.Errorf("--clip-grad-norm %v: must not be negative", o.ClipGradNorm)
	}
	if _, err := optim.New(o.optimConfig(), 0); err != nil {
		return err
	}
	return (optim.Schedule{Kind: o.Schedule, Warmup: o.WarmupSteps, StepSize: max(o.StepEpochs, 0), Gamma: o.Gamma}).Validate()
}

// Validate checks the distribution options' values (which strategy may use
// them is validateCombinations' business).
func (d *DistOptions) Validate() error {
	switch {
	case d.SyncEvery < 1:
		return fmt.Errorf("--sync-every %d: must be at least 1", d.SyncEvery)
	case d.Servers < 1:
		return fmt.Errorf("--servers %d: must be at least 1", d.Servers)
	case d.Staleness < -1:
		return fmt.Errorf("--staleness %d: 0 or more, or -1 for no bound", d.Staleness)
	case d.PushEvery < 1 || d.FetchEvery < 1:
		return fmt.Errorf("--push-every %d --fetch-every %d: must be at least 1", d.PushEvery, d.FetchEvery)
	case !(d.Buckets.MiB >= 0):
		return fmt.Errorf("--bucket-mb %v: must not be negative", d.Buckets.MiB)
	case d.StallWarn < 0 || d.StallTimeout < 0:
		return fmt.Errorf("--stall-warn %v --stall-timeout %v: must not be negative", d.StallWarn, d.StallTimeout)
	case d.StallTimeout > 0 && d.StallTimeout < d.StallWarn:
		return fmt.Errorf("--stall-timeout %v is shorter than --stall-warn %v", d.StallTimeout, d.StallWarn)
	}
	return nil
}

// Validate checks the device options.
func (d *DeviceOptions) Validate() error {
	switch {
	case d.Threads < 0:
		return fmt.Errorf("--threads %d: must not be negative", d.Threads)
	case d.Device == CPU && d.Precision != "" && d.Precision != "fp32":
		return fmt.Errorf("--precision %s is for --device cuda; the CPU path computes in fp32", d.Precision)
	case !slices.Contains([]string{"auto", "ipc", "host"}, d.GPURing):
		return fmt.Errorf("--gpu-ring %q: choose auto, ipc or host", d.GPURing)
	}
	return nil
}

// Validate checks the observation options.
func (o *ObserveOptions) Validate() error {
	switch {
	case o.LogEvery <= 0:
		return fmt.Errorf("--log-every %d: must be positive", o.LogEvery)
	case o.PushgatewayEvery < 0:
		return fmt.Errorf("--pushgateway-every %d: must not be negative", o.PushgatewayEvery)
	case o.Pushgateway != "" && !validURL(o.Pushgateway):
		return fmt.Errorf("--pushgateway %q: want an http:// or https:// URL", o.Pushgateway)
	}
	return nil
}

// Validate checks the checkpoint options.
func (k *CheckpointOptions) Validate() error {
	switch {
	case k.Every < 0:
		return fmt.Errorf("--checkpoint-every %d: must not be negative", k.Every)
	case k.Keep < 0:
		return fmt.Errorf("--keep %d: must not be negative", k.Keep)
	case k.Resume && k.Dir == "":
		return fmt.Errorf("--resume needs --checkpoint-dir")
	}
	return nil
}

// usedBy says which choices make use of an option that only some of them
// read: given with any other, the option would be ignored, so it is
// refused. The flag name is the key of Config.Set; val is the value given
// and with the choice that makes it useless (for the message).
var usedBy = []struct {
	flag string
	val  func(c *Config) any
	uses func(c *Config) bool
	with func(c *Config) string
	who  string
}{
	{"hidden", func(c *Config) any { return c.Model.Hidden }, func(c *Config) bool { return c.Model.Kind == "mlp" }, withModel, "--model mlp"},
	{"depth", func(c *Config) any { return c.Model.Depth }, func(c *Config) bool { return c.Model.Kind == "resnet" }, withModel, "--model resnet"},
	{"synthetic-shape", func(c *Config) any { return c.Data.SyntheticShape }, func(c *Config) bool { return c.Data.Dir == "synthetic" }, withData, "--data synthetic"},
	{"synthetic-samples", func(c *Config) any { return c.Data.SyntheticSamples }, func(c *Config) bool { return c.Data.Dir == "synthetic" }, withData, "--data synthetic"},
	{"crop-pad", func(c *Config) any { return c.Data.CropPad }, func(c *Config) bool { crop, _ := c.augment(); return crop }, withAugment,
		"the crop augmentation (--augment crop, or auto with cnn and resnet)"},
	{"momentum", func(c *Config) any { return c.Optim.Momentum }, func(c *Config) bool { return c.Optim.Optimizer == "sgd" }, withOptimizer, "--optimizer sgd"},
	{"nesterov", func(c *Config) any { return c.Optim.Nesterov }, func(c *Config) bool { return c.Optim.Optimizer == "sgd" }, withOptimizer, "--optimizer sgd"},
	{"beta1", func(c *Config) any { return c.Optim.Beta1 }, func(c *Config) bool { return c.Optim.Optimizer != "sgd" }, withOptimizer, "--optimizer adam or adamw"},
	{"beta2", func(c *Config) any { return c.Optim.Beta2 }, func(c *Config) bool { return c.Optim.Optimizer != "sgd" }, withOptimizer, "--optimizer adam or adamw"},
	{"eps", func(c *Config) any { return c.Optim.Eps }, func(c *Config) bool { return c.Optim.Optimizer != "sgd" }, withOptimizer, "--optimizer adam or adamw"},
	{"lr-step-epochs", func(c *Config) any { return c.Optim.StepEpochs }, func(c *Config) bool { return c.Optim.Schedule == "step" }, withSchedule, "--lr-schedule step"},
	{"lr-gamma", func(c *Config) any { return c.Optim.Gamma }, func(c *Config) bool { return c.Optim.Schedule == "step" }, withSchedule, "--lr-schedule step"},
	{"allreduce", func(c *Config) any { return c.Dist.Allreduce }, func(c *Config) bool { return !c.Dist.Strategy.servers() }, withStrategy,
		"the strategies that average over the ranks (allreduce, local-sgd); parameter servers take the gradients instead"},
	{"bucket-mb", func(c *Config) any { return c.Dist.Buckets }, func(c *Config) bool { return c.Dist.Strategy == AllreduceStrategy }, withStrategy, "--strategy allreduce's gradient buckets"},
	{"overlap", func(c *Config) any { return c.Dist.Overlap }, func(c *Config) bool { return c.Dist.Strategy == AllreduceStrategy }, withStrategy, "--strategy allreduce's gradient buckets"},
	{"sync-every", func(c *Config) any { return c.Dist.SyncEvery }, func(c *Config) bool { return c.Dist.Strategy == LocalSGD }, withStrategy, "--strategy local-sgd"},
	{"servers", func(c *Config) any { return c.Dist.Servers }, func(c *Config) bool { return c.Dist.Strategy.servers() }, withStrategy, "--strategy ps-sync or ps-async"},
	{"colocate", func(c *Config) any { return c.Dist.Colocate }, func(c *Config) bool { return c.Dist.Strategy.servers() }, withStrategy,
		"--strategy ps-sync or ps-async (it places parameter servers)"},
	{"staleness", func(c *Config) any { return c.Dist.Staleness }, func(c *Config) bool { return c.Dist.Strategy == PSAsync }, withStrategy,
		"--strategy ps-async (ps-sync's servers wait for every worker)"},
	{"push-every", func(c *Config) any { return c.Dist.PushEvery }, func(c *Config) bool { return c.Dist.Strategy == PSAsync }, withStrategy,
		"--strategy ps-async: Downpour's n_push (the Pushgateway's interval is --pushgateway-every)"},
	{"fetch-every", func(c *Config) any { return c.Dist.FetchEvery }, func(c *Config) bool { return c.Dist.Strategy == PSAsync }, withStrategy,
		"--strategy ps-async: Downpour's n_fetch"},
	{"gpu-ring", func(c *Config) any { return c.Device.GPURing }, func(c *Config) bool { return c.Device.Device == CUDA && c.Dist.Allreduce == Ring }, withDevice,
		"--device cuda --allreduce ring"},
	{"gpu-deterministic", func(c *Config) any { return c.Device.GPU.Deterministic }, func(c *Config) bool { return c.Device.Device == CUDA }, withDevice, "--device cuda"},
	{"gpu-profile", func(c *Config) any { return c.Device.GPU.Profile }, func(c *Config) bool { return c.Device.Device == CUDA }, withDevice, "--device cuda"},
	{"libcuda", func(c *Config) any { return c.Device.GPU.Libraries.CUDA }, func(c *Config) bool { return c.Device.Device == CUDA }, withDevice, "--device cuda"},
	{"libnvrtc", func(c *Config) any { return c.Device.GPU.Libraries.NVRTC }, func(c *Config) bool { return c.Device.Device == CUDA }, withDevice, "--device cuda"},
	{"libcublas", func(c *Config) any { return c.Device.GPU.Libraries.CUBLAS }, func(c *Config) bool { return c.Device.Device == CUDA }, withDevice, "--device cuda"},
	{"libcudnn", func(c *Config) any { return c.Device.GPU.Libraries.CUDNN }, func(c *Config) bool { return c.Device.Device == CUDA }, withDevice, "--device cuda"},
	{"libnccl", func(c *Config) any { return c.Device.GPU.Libraries.NCCL }, func(c *Config) bool { return c.Device.Device == CUDA && c.Dist.Allreduce == NCCL }, withDevice,
		"--device cuda --allreduce nccl"},
}

func withModel(c *Config) string     { return "--model " + c.Model.Kind }
func withData(c *Config) string      { return "--data " + c.Data.Dir }
func withOptimizer(c *Config) string { return "--optimizer " + c.Optim.Optimizer }
func withSchedule(c *Config) string  { return "--lr-schedule " + c.Optim.Schedule }
func withStrategy(c *Config) string  { return "--strategy " + c.Dist.Strategy.String() }
func withDevice(c *Config) string {
	return fmt.Sprintf("--device %s --allreduce %s", c.Device.Device, c.Dist.Allreduce)
}
func withAugment(c *Config) string {
	return fmt.Sprintf("--model %s and --augment %s", c.Model.Kind, map[bool]string{true: "auto", false: "without crop"}[c.Data.Augment.Auto])
}

func (b Buckets) String() string {
	if b.Auto {
		return "auto"
	}
	return fmt.Sprint(b.MiB)
}

// validateCombinations checks the options against each other.
func (c *Config) validateCombinations() error {
	d := &c.Dist
	for _, u := range usedBy {
		if c.Set[u.flag] && !u.uses(c) {
			return fmt.Errorf("--%s %v is not used with %s: it is for %s; drop it", u.flag, u.val(c), u.with(c), u.who)
		}
	}
	switch {
	case c.Device.Device == CPU && d.Allreduce == NCCL && !d.Strategy.servers():
		return fmt.Errorf("--allreduce nccl needs --device cuda (NCCL reduces GPU buffers); use ring or mpi")
	case c.Device.Device == CUDA && d.Strategy != AllreduceStrategy:
		return fmt.Errorf("--device cuda with --strategy %s: the GPU path trains with --strategy allreduce so far", d.Strategy)
	case c.Device.Device == CUDA && (d.Allreduce == Hier || d.Compress != mpi.None):
		return fmt.Errorf("--device cuda: --allreduce hier and --compress are CPU-path features; use --allreduce ring, nccl or mpi")
	case d.Compress != mpi.None && (d.Allreduce == MPIAllreduce || d.Strategy != AllreduceStrategy):
		return fmt.Errorf("--compress %s: compresses the gradients of --strategy allreduce with --allreduce ring or hier (MPI_Allreduce would sum in 16 bits)", d.Compress)
	case d.Strategy.servers() && c.Optim.ClipGradNorm > 0:
		return fmt.Errorf("--clip-grad-norm with --strategy %s: the servers see only their shards of the gradient; clip with allreduce", d.Strategy)
	case c.Set["bn"] && d.BN == BNSync && (d.Strategy == LocalSGD || d.Strategy == PSAsync):
		return fmt.Errorf("--bn sync with --strategy %s: replicas that step on their own cannot share batch statistics (a reduction in every BatchNorm layer would hold them in lockstep); use --bn local, the default here", d.Strategy)
	}
	return nil
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
