package trainer

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"train/optim"
)

// Config is everything a training run is told, filled from flags in main.
type Config struct {
	Model  string
	Hidden []int // MLP
	Depth  int   // ResNet

	DataDir          string // a directory, or "synthetic"
	SyntheticShape   string // CxHxW
	SyntheticSamples int
	Augment          string // "auto", "none", "crop", "flip", "crop,flip"
	CropPad          int

	BatchSize    int // per rank
	EvalBatch    int // 0: BatchSize
	Epochs       int
	MaxSteps     int // 0: no limit
	Optimizer    string
	LR           float64
	LRScaling    string // "none" or "linear"
	LRSchedule   string
	WarmupSteps  int
	LRStepEpochs int
	LRGamma      float64
	Momentum     float64
	Nesterov     bool
	WeightDecay  float64
	Beta1, Beta2 float64
	Eps          float64
	ClipGradNorm float64 // 0: off
	Seed         uint64

	Device    string // "cpu" or "cuda"
	Precision string // cuda: fp32, tf32 or bf16 (package gpu's Precision)
	Strategy  string // "allreduce" or "local-sgd"
	SyncEvery int    // local-sgd: steps between averages
	Servers   int    // ps-*: the last Servers ranks are parameter servers
	Colocate  bool   // ps-*: the servers run beside workers, in ranks 0..Servers-1
	Staleness int    // ps-async: how many updates a worker may run ahead of the slowest (-1: no bound)
	// ps-async (Downpour's n_push, n_fetch): a worker pushes its summed
	// gradients every PSPushEvery steps and fetches the parameters every
	// PSFetchEvery steps; 1 and 1 is a push and a pull every step.
	PSPushEvery, PSFetchEvery int
	Allreduce                 string
	Compress                  string  // "none", "fp16", "bf16": the gradient ring's wire format
	BucketMB                  float64 // gradient bucket size; 0: one bucket; NaN: not a number (an error)
	BucketAuto                bool    // --bucket-mb auto: try sizes in the first steps, keep the fastest
	Overlap                   bool    // allreduce buckets during backward
	BN                        string  // "sync" or "local"
	Threads                   int     // BLAS threads per rank; 0: from the cores per local rank

	MetricsAddr      string // HOST:PORT; each rank serves PORT + local rank; "": off
	Pushgateway      string // URL; rank 0 pushes every PushgatewayEvery steps and at the end
	PushgatewayEvery int
	Timeline         string // Chrome trace file; each rank writes TimelinePath(Timeline, rank)
	LogFile          string // JSON lines on rank 0
	Plot             string // PNG of the curves, written at the end on rank 0
	Progress         string // "auto", "always", "never": rank 0's progress bar

	StallWarn    time.Duration // report ranks missing from a collective after this; 0: no watchdog
	StallTimeout time.Duration // abort the job after this; 0: never

	CheckpointDir   string
	CheckpointEvery int // steps; 0: only at the end
	Keep            int // checkpoints kept; 0: all
	Resume          bool
	LogEvery        int
	// Fault, for tests: "RANK:STEP:KIND", see fault.go.
	Fault string
}

// Allreduces lists the gradient allreduce algorithms.
var Allreduces = []string{"ring", "mpi", "hier", "nccl"}

// optimConfig is the optimizer part of c, with only the settings the
// chosen optimizer uses.
func (c *Config) optimConfig() optim.Config {
	o := optim.Config{Name: c.Optimizer, WeightDecay: c.WeightDecay}
	if c.Optimizer == "sgd" {
		o.Momentum, o.Nesterov = c.Momentum, c.Nesterov
	} else {
		o.Beta1, o.Beta2, o.Eps = c.Beta1, c.Beta2, c.Eps
	}
	return o
}

// augment reads --augment for a model: "auto" is crop and flip for the
// convolutional networks and nothing for the MLP.
func (c *Config) augment() (crop, flip bool, err error) {
	a := c.Augment
	if a == "auto" {
		if c.Model == "mlp" {
			return false, false, nil
		}
		a = "crop,flip"
	}
	if a == "none" || a == "" {
		return false, false, nil
	}
	for _, p := range strings.Split(a, ",") {
		switch strings.TrimSpace(p) {
		case "crop":
			crop = true
		case "flip":
			flip = true
		default:
			return false, false, fmt.Errorf("--augment %q: want auto, none, or crop and/or flip (comma-separated)", c.Augment)
		}
	}
	return crop, flip, nil
}

// modelName names the network for logs: the model, with ResNet's depth.
func (c *Config) modelName() string {
	if c.Model == "resnet" {
		return fmt.Sprintf("resnet-%d", c.Depth)
	}
	return c.Model
}

// trainers is how many of size ranks train: all but the parameter servers.
func (c *Config) trainers(size int) int {
	if strings.HasPrefix(c.Strategy, "ps-") && !c.Colocate {
		return size - c.Servers
	}
	return size
}

// Validate checks what can be checked without data or MPI.
func (c *Config) Validate() error {
	switch {
	case c.BatchSize <= 0:
		return fmt.Errorf("--batch-size %d: must be positive", c.BatchSize)
	case c.Epochs <= 0:
		return fmt.Errorf("--epochs %d: must be positive", c.Epochs)
	case c.MaxSteps < 0:
		return fmt.Errorf("--max-steps %d: must be 0 (no limit) or positive", c.MaxSteps)
	case !(c.LR > 0):
		return fmt.Errorf("--lr %v: must be positive", c.LR)
	case c.LRScaling != "none" && c.LRScaling != "linear":
		return fmt.Errorf("--lr-scaling %q: choose none or linear", c.LRScaling)
	case c.Momentum < 0 || c.Momentum >= 1:
		return fmt.Errorf("--momentum %v: must be in [0, 1)", c.Momentum)
	case c.WeightDecay < 0:
		return fmt.Errorf("--weight-decay %v: must not be negative", c.WeightDecay)
	case c.ClipGradNorm < 0:
		return fmt.Errorf("--clip-grad-norm %v: must not be negative", c.ClipGradNorm)
	case c.CheckpointEvery < 0:
		return fmt.Errorf("--checkpoint-every %d: must not be negative", c.CheckpointEvery)
	case c.Keep < 0:
		return fmt.Errorf("--keep %d: must not be negative", c.Keep)
	case c.Device != "cpu" && c.Device != "cuda":
		return fmt.Errorf("--device %q: choose cpu or cuda", c.Device)
	case c.Precision != "" && c.Precision != "fp32" && c.Precision != "tf32" && c.Precision != "bf16":
		return fmt.Errorf("--precision %q: choose fp32, tf32 or bf16", c.Precision)
	case c.Device == "cpu" && c.Precision != "" && c.Precision != "fp32":
		return fmt.Errorf("--precision %s is for --device cuda; the CPU path computes in fp32", c.Precision)
	case c.Device == "cpu" && c.Allreduce == "nccl":
		return fmt.Errorf("--allreduce nccl needs --device cuda (NCCL reduces GPU buffers); use ring or mpi")
	case c.Device == "cuda" && c.Strategy != "allreduce":
		return fmt.Errorf("--device cuda with --strategy %s: the GPU path trains with --strategy allreduce so far", c.Strategy)
	case c.Device == "cuda" && (c.Allreduce == "hier" || c.Compress != "none"):
		return fmt.Errorf("--device cuda: --allreduce hier and --compress are CPU-path features; use --allreduce ring, nccl or mpi")
	case !slices.Contains([]string{"allreduce", "local-sgd", "ps-sync", "ps-async"}, c.Strategy):
		return fmt.Errorf("--strategy %q: choose allreduce, ps-sync, ps-async or local-sgd", c.Strategy)
	case c.Staleness < -1:
		return fmt.Errorf("--staleness %d: 0 or more, or -1 for no bound", c.Staleness)
	case c.Compress != "none" && c.Compress != "fp16" && c.Compress != "bf16":
		return fmt.Errorf("--compress %q: choose none, fp16 or bf16", c.Compress)
	case c.Compress != "none" && (c.Allreduce == "mpi" || c.Strategy != "allreduce"):
		return fmt.Errorf("--compress %s: compresses the gradients of --strategy allreduce with --allreduce ring or hier (MPI_Allreduce would sum in 16 bits)", c.Compress)
	case c.Colocate && !strings.HasPrefix(c.Strategy, "ps-"):
		return fmt.Errorf("--colocate with --strategy %s: it places parameter servers; use --strategy ps-sync or ps-async", c.Strategy)
	case strings.HasPrefix(c.Strategy, "ps-") && c.ClipGradNorm > 0:
		return fmt.Errorf("--clip-grad-norm with --strategy ps-sync: the servers see only their shards of the gradient; clip with allreduce")
	case c.SyncEvery < 1:
		return fmt.Errorf("--sync-every %d: must be at least 1", c.SyncEvery)
	case math.IsNaN(c.BucketMB):
		return fmt.Errorf("--bucket-mb: want a size in MiB (0: one bucket) or auto")
	case c.BucketMB < 0:
		return fmt.Errorf("--bucket-mb %v: must not be negative", c.BucketMB)
	case c.LogEvery <= 0:
		return fmt.Errorf("--log-every %d: must be positive", c.LogEvery)
	case c.Resume && c.CheckpointDir == "":
		return fmt.Errorf("--resume needs --checkpoint-dir")
	case c.BN != "sync" && c.BN != "local":
		return fmt.Errorf("--bn %q: choose sync (statistics over all ranks) or local (per rank)", c.BN)
	case c.Threads < 0:
		return fmt.Errorf("--threads %d: must not be negative", c.Threads)
	case c.CropPad < 0:
		return fmt.Errorf("--crop-pad %d: must not be negative", c.CropPad)
	case c.Progress != "auto" && c.Progress != "always" && c.Progress != "never":
		return fmt.Errorf("--progress %q: choose auto, always or never", c.Progress)
	case c.StallWarn < 0 || c.StallTimeout < 0:
		return fmt.Errorf("--stall-warn %v --stall-timeout %v: must not be negative", c.StallWarn, c.StallTimeout)
	case c.StallTimeout > 0 && c.StallTimeout < c.StallWarn:
		return fmt.Errorf("--stall-timeout %v is shorter than --stall-warn %v", c.StallTimeout, c.StallWarn)
	case c.PushgatewayEvery < 0:
		return fmt.Errorf("--pushgateway-every %d: must not be negative", c.PushgatewayEvery)
	case c.PSPushEvery < 1 || c.PSFetchEvery < 1:
		return fmt.Errorf("--push-every %d --fetch-every %d: must be at least 1", c.PSPushEvery, c.PSFetchEvery)
	case (c.PSPushEvery != 1 || c.PSFetchEvery != 1) && c.Strategy != "ps-async":
		return fmt.Errorf("--push-every and --fetch-every are Downpour's: use them with --strategy ps-async (for the Pushgateway's interval see --pushgateway-every)")
	case c.Pushgateway != "" && !validURL(c.Pushgateway):
		return fmt.Errorf("--pushgateway %q: want an http:// or https:// URL", c.Pushgateway)
	case c.EvalBatch < 0:
		return fmt.Errorf("--eval-batch %d: must not be negative", c.EvalBatch)
	}
	if c.EvalBatch == 0 {
		c.EvalBatch = c.BatchSize
	}
	ok := false
	for _, a := range Allreduces {
		ok = ok || a == c.Allreduce
	}
	if !ok {
		return fmt.Errorf("unknown --allreduce %q: choose one of %s", c.Allreduce, strings.Join(Allreduces, ", "))
	}
	if _, err := optim.New(c.optimConfig(), 0); err != nil {
		return err
	}
	if err := (optim.Schedule{Kind: c.LRSchedule, Warmup: c.WarmupSteps, StepSize: max(c.LRStepEpochs, 0), Gamma: c.LRGamma}).Validate(); err != nil {
		return err
	}
	if _, _, err := c.augment(); err != nil {
		return err
	}
	if _, err := parseFault(c.Fault); err != nil {
		return err
	}
	return nil
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
