package trainer

import (
	"fmt"
	"time"

	"train/data"
	"train/gpu"
	"train/model"
	"train/mpi"
	"train/optim"
)

// Config is everything a run is told, in the groups the options come in.
// main parses every choice into its type as it reads the flags (the Parse
// functions of choices.go), Defaults fills in what depends on other
// choices, and Validate (validate.go) checks each group on its own and then
// how they combine. Nothing
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
	// Same is what every rank must run alike (same.go): "--name value" for
	// each option, at its default too, but those naming a host's own
	// libraries or ports; and "build REVISION". Empty: nothing checked.
	Same []string
	// Fault, for tests: "RANK:STEP:KIND", see fault.go (TRAIN_FAULT).
	Fault string
}

// ModelOptions choose the network.
type ModelOptions struct {
	Kind   string // mlp, cnn, resnet or gpt (model.Build knows them)
	Hidden []int  // MLP hidden layer sizes
	Depth  int    // ResNet depth, 6n+2
	// gpt (a preset such as --model gpt2 fills them in): blocks, heads,
	// width, context; Vocab > 0 overrides the tokens' vocabulary.
	Layers, Heads, Dim, Context, Vocab int
	// InitFrom is a safetensors file of weights to start from instead of
	// drawing them (a checkpoint --resume finds comes first).
	InitFrom string
	// Conv is how the CPU computes 3x3 stride-1 padding-1 convolutions of
	// at least 4x4: "winograd" (F(4x4, 3x3), model/winograd.c; --conv's
	// default) or "im2col" (and one SGEMM; also what "" means here).
	Conv string
}

// DataOptions choose the data and how it is batched.
type DataOptions struct {
	Dir              string // a directory, or "synthetic"
	SyntheticShape   string // CxHxW
	SyntheticSamples int
	Augment          Augment
	CropPad          int
	// Image folders (data/imageset.go): ValDir is --val-data (""; Dir's
	// val/), ImageSize the views' side (0: 224), Resize the evaluation view's
	// shorter side before its centre crop (0: ImageSize x 256/224),
	// Workers the decoding goroutines per batch (0: the rank's threads).
	ValDir    string
	ImageSize int
	Resize    int
	Workers   int
	SkipBad   bool // --skip-bad: replace images that do not decode, with a warning
	// Ordered is --shuffle=false: every epoch reads the samples in the
	// data's order (tar shards: the pattern's, then each shard's).
	Ordered bool
	// ShuffleBuffer is tar shards' shuffle buffer per rank, in samples
	// (data.Stream).
	ShuffleBuffer int
	// Mean and Std are Normalize's per channel (--mean, --std; zero:
	// ImageNet's).
	Mean, Std [3]float32
	BatchSize int // per data-parallel rank
	// MicroBatches splits each rank's batch into this many equal parts run
	// one after another, their gradients summed (exec_micro.go): the
	// pipeline's micro-batches on one stage, and its reference.
	MicroBatches int // 0 or 1: whole batches
	EvalBatch    int // 0: BatchSize (Defaults)
	// AccumSteps is --accum-steps: micro-steps per optimizer step, their
	// gradients summed with no communication until the last (0 or 1: none;
	// AccumAuto: the fewest whose micro-batch fits in BatchSize). With
	// GlobalBatch > 0 (--global-batch) the samples of one optimizer step
	// over all data-parallel replicas are fixed, and BatchSize is the
	// largest micro-batch a rank runs. batchPlan turns them into the
	// per-rank step batch once the replicas are known.
	AccumSteps  int
	GlobalBatch int
}

// AccumAuto is --accum-steps auto.
const AccumAuto = -1

// OptimOptions are the optimizer, its learning-rate schedule, and how long
// training runs (the schedule plans for Epochs).
type OptimOptions struct {
	Optimizer     string // sgd, adam or adamw
	LR            float64
	LinearScaling bool // --lr-scaling linear: LR x data-parallel ranks
	Schedule      string
	WarmupSteps   int
	DecaySteps    int // cosine's length in steps; 0: the epochs'
	StepEpochs    int
	Gamma         float64
	Momentum      float64
	Nesterov      bool
	WeightDecay   float64
	DecayAll      bool // gpt: decay biases and LayerNorms too
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
	// The model-parallel grid: np = D x Pipeline x TensorParallel
	// (mpi.Shape); the strategy averages over the D replicas of each part.
	Pipeline       int      // stages; 0 or 1: none
	TensorParallel int      // shards of each transformer block; 0 or 1: none
	Schedule       Schedule // the pipeline's
	Stages         []int    // layers per stage; nil: balanced by estimated cost
	// Zero is --zero: the ZeRO stage among the data-parallel replicas
	// (exec_zero.go): 1 shards the optimizer's state, 2 the gradients as
	// well, 3 the parameters as well; 0 keeps full replicas.
	Zero int
}

// gridded reports whether the model is split across ranks.
func (d *DistOptions) gridded() bool { return d.Pipeline > 1 || d.TensorParallel > 1 }

// DeviceOptions say where the arithmetic runs and with which libraries.
type DeviceOptions struct {
	Device    Device
	Precision gpu.Precision // "" until Defaults: fp32
	Threads   int           // compute threads per rank (model.SetThreads); 0: from the cores per local rank
	OpenBLAS  string        // another OpenBLAS build (a path or a soname); "": Debian's
	Gemm      string        // the CPU products' kernels: "blas" (or "") or "amx" (model.UseAMX)
	GPU       gpu.Options   // --device cuda: cuDNN determinism, profiling, libraries
	GPURing   string        // --device cuda --allreduce ring: auto, ipc or host
}

// ObserveOptions say how the run is watched.
type ObserveOptions struct {
	MetricsAddr      string // HOST:PORT; each rank serves PORT + local rank; "": off
	Pushgateway      string // URL; rank 0 pushes every PushgatewayEvery steps and at the end
	PushgatewayEvery int
	Timeline         string // Chrome trace file; each rank writes timeline.Path(Timeline, rank)
	LogFile          string // JSON lines on rank 0
	Plot             string // PNG of the curves, written at the end on rank 0
	Progress         Progress
	LogEvery         int
	EvalEvery        int // steps between evaluations inside epochs; 0: at epoch ends only
	Job              Job // where the launcher put us, for logs and metrics
	// FlightEvents is the flight recorder's size per rank (0: off);
	// FlightDir where its dumps go ("": <checkpoint dir>/flight, or
	// ./flight without checkpoints). See flight.go.
	FlightEvents int
	FlightDir    string
	// SampleLog is --sample-log: a directory where each rank records the
	// samples it trains on (samplelog.go); "": none.
	SampleLog string
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
	Format CheckpointFormat
}

// ModelName names the network for logs: the model, with ResNet's depth
// or the GPT's sizes.
func (c *Config) ModelName() string {
	m := &c.Model
	switch m.Kind {
	case "resnet", "resnet-cifar":
		family, _ := model.ResNetFamily(m.Kind, m.Depth)
		if family == model.CIFAR {
			return fmt.Sprintf("resnet-%d (the CIFAR ResNet of He et al.)", m.Depth)
		}
		return fmt.Sprintf("resnet-%d (torchvision's)", m.Depth)
	case "gpt":
		return fmt.Sprintf("gpt (%d layers, %d heads, dim %d, context %d)", m.Layers, m.Heads, m.Dim, m.Context)
	}
	return m.Kind
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
		images := c.Model.Kind == "cnn" || c.Model.resnet()
		return images, images
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

// resnet reports whether the model is one of the ResNets.
func (m *ModelOptions) resnet() bool { return m.Kind == "resnet" || m.Kind == "resnet-cifar" }

// imageFolder reports whether the data is images decoded from files: an
// image folder or tar shards (--val-data given, --data holding train/ and
// val/, or tar shards).
func (d *DataOptions) imageFolder() bool {
	return d.ValDir != "" || d.Dir != "synthetic" && (data.IsImageFolder(d.Dir) || d.tarShards())
}

// tarShards reports whether --data names tar shards: a pattern of .tar
// files, or a directory of train-NNNNNN.tar (what `train data pack`
// writes).
func (d *DataOptions) tarShards() bool {
	_, ok := data.ShardPattern(d.Dir, "train")
	return ok
}
