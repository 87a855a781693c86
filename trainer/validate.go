package trainer

import (
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"train/model"
	"train/mpi"
	"train/optim"
)

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
		return fmt.Errorf("unknown model %q: choose %s (or a GPT-2 preset: gpt2, gpt2-medium, gpt2-large, gpt2-xl)", m.Kind, orList(model.Kinds))
	}
	if m.Kind == "gpt" {
		switch {
		case m.Layers < 1 || m.Heads < 1 || m.Dim < 1 || m.Context < 1:
			return fmt.Errorf("--layers %d --heads %d --dim %d --context %d: all must be positive", m.Layers, m.Heads, m.Dim, m.Context)
		case m.Dim%m.Heads != 0:
			return fmt.Errorf("--heads %d does not divide --dim %d: each head takes dim/heads columns", m.Heads, m.Dim)
		case m.Vocab < 0 || m.Vocab > 1<<16:
			return fmt.Errorf("--vocab %d: between 1 and 65536 (token shards hold uint16), or 0 for the shards' own", m.Vocab)
		}
	}
	if m.Conv != "" && m.Conv != "im2col" && m.Conv != "winograd" {
		return fmt.Errorf("--conv %q: choose im2col or winograd", m.Conv)
	}
	for _, h := range m.Hidden {
		if h <= 0 {
			return fmt.Errorf("--hidden %v: layer sizes must be positive", m.Hidden)
		}
	}
	if m.resnet() {
		if _, err := model.ResNetFamily(m.Kind, m.Depth); err != nil {
			return err
		}
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
	case d.MicroBatches < 0:
		return fmt.Errorf("--micro-batches %d: must not be negative (0 and 1 both run whole batches)", d.MicroBatches)
	case d.MicroBatches > 1 && d.BatchSize%d.MicroBatches != 0:
		return fmt.Errorf("--micro-batches %d does not divide --batch-size %d: each micro-batch must have the same number of samples", d.MicroBatches, d.BatchSize)
	case d.GlobalBatch < 0:
		return fmt.Errorf("--global-batch %d: must be positive (0: --batch-size per rank)", d.GlobalBatch)
	case d.AccumSteps == AccumAuto && d.GlobalBatch == 0:
		return fmt.Errorf("--accum-steps auto needs --global-batch: it picks the micro-steps that reach that batch; give a number, or --global-batch")
	case d.MicroBatches > 1 && (d.AccumSteps > 1 || d.AccumSteps == AccumAuto || d.GlobalBatch > 0):
		return fmt.Errorf("--micro-batches %d with --accum-steps or --global-batch: both run a step in micro-batches; use --accum-steps (or --micro-batches alone)", d.MicroBatches)
	case d.CropPad < 0:
		return fmt.Errorf("--crop-pad %d: must not be negative", d.CropPad)
	case d.Std != [3]float32{} && (d.Std[0] <= 0 || d.Std[1] <= 0 || d.Std[2] <= 0):
		return fmt.Errorf("--std %v: every channel's must be positive", d.Std)
	case d.ShuffleBuffer < 0:
		return fmt.Errorf("--shuffle-buffer %d: must not be negative (0 or 1: no buffer)", d.ShuffleBuffer)
	case d.ImageSize < 0 || d.Resize < 0 || d.Workers < 0:
		return fmt.Errorf("--image-size %d --resize %d --data-workers %d: must not be negative", d.ImageSize, d.Resize, d.Workers)
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
	case o.DecayAll && o.WeightDecay == 0:
		return fmt.Errorf("--decay-all without --weight-decay: there is no decay to extend")
	case o.DecaySteps < 0:
		return fmt.Errorf("--lr-decay-steps %d: must not be negative", o.DecaySteps)
	case o.DecaySteps > 0 && o.DecaySteps <= o.WarmupSteps:
		return fmt.Errorf("--lr-decay-steps %d is not longer than --warmup-steps %d: the decay starts after the warm-up", o.DecaySteps, o.WarmupSteps)
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
	case d.Threads > model.MaxThreads:
		return fmt.Errorf("--threads %d: at most %d per rank (0: the cores this rank may use)", d.Threads, model.MaxThreads)
	case d.Device == CPU && d.Precision != "" && d.Precision != "fp32":
		return fmt.Errorf("--precision %s is for --device cuda; the CPU path computes in fp32", d.Precision)
	case !slices.Contains([]string{"", "blas", "amx", "avx512"}, d.Gemm):
		return fmt.Errorf("--gemm %q: choose blas, amx or avx512", d.Gemm)
	case d.Device == CUDA && (d.Gemm == "amx" || d.Gemm == "avx512"):
		return fmt.Errorf("--gemm %s is for the CPU path; --device cuda multiplies on the GPU", d.Gemm)
	case !slices.Contains([]string{"auto", "ipc", "host"}, d.GPURing):
		return fmt.Errorf("--gpu-ring %q: choose auto, ipc or host", d.GPURing)
	}
	return nil
}

// Validate checks the observation options.
func (o *ObserveOptions) Validate() error {
	switch {
	case o.FlightEvents < 0:
		return fmt.Errorf("--flight-events %d: must not be negative (0 turns the flight recorder off)", o.FlightEvents)
	case o.LogEvery <= 0:
		return fmt.Errorf("--log-every %d: must be positive", o.LogEvery)
	case o.EvalEvery < 0:
		return fmt.Errorf("--eval-every %d: must not be negative", o.EvalEvery)
	case o.PushgatewayEvery < 0:
		return fmt.Errorf("--pushgateway-every %d: must not be negative", o.PushgatewayEvery)
	case o.Plot != "" && !strings.EqualFold(filepath.Ext(o.Plot), ".png"):
		return fmt.Errorf("--plot %s: only PNG is written: name a .png file", o.Plot)
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
	{"layers", func(c *Config) any { return c.Model.Layers }, func(c *Config) bool { return c.Model.Kind == "gpt" }, withModel, "--model gpt"},
	{"heads", func(c *Config) any { return c.Model.Heads }, func(c *Config) bool { return c.Model.Kind == "gpt" }, withModel, "--model gpt"},
	{"dim", func(c *Config) any { return c.Model.Dim }, func(c *Config) bool { return c.Model.Kind == "gpt" }, withModel, "--model gpt"},
	{"context", func(c *Config) any { return c.Model.Context }, func(c *Config) bool { return c.Model.Kind == "gpt" }, withModel, "--model gpt"},
	{"vocab", func(c *Config) any { return c.Model.Vocab }, func(c *Config) bool { return c.Model.Kind == "gpt" }, withModel, "--model gpt"},
	{"augment", func(c *Config) any { return c.Data.Augment }, func(c *Config) bool { return c.Model.Kind != "gpt" }, withModel, "the image models (mlp, cnn, resnet, resnet-cifar)"},
	{"depth", func(c *Config) any { return c.Model.Depth }, func(c *Config) bool { return c.Model.resnet() }, withModel, "--model resnet or resnet-cifar"},
	{"conv", func(c *Config) any { return c.Model.Conv }, func(c *Config) bool { return c.Model.Kind != "mlp" && c.Model.Kind != "gpt" && c.Device.Device != CUDA },
		func(c *Config) string {
			if c.Device.Device == CUDA {
				return withDevice(c)
			}
			return withModel(c)
		}, "the convolutional models on the CPU (--device cuda convolves through cuDNN)"},
	{"synthetic-shape", func(c *Config) any { return c.Data.SyntheticShape }, func(c *Config) bool { return c.Data.Dir == "synthetic" }, withData, "--data synthetic"},
	{"synthetic-samples", func(c *Config) any { return c.Data.SyntheticSamples }, func(c *Config) bool { return c.Data.Dir == "synthetic" }, withData, "--data synthetic"},
	{"crop-pad", func(c *Config) any { return c.Data.CropPad }, func(c *Config) bool { crop, _ := c.augment(); return crop && !c.Data.imageFolder() }, withAugment,
		"the crop augmentation of in-memory datasets (--augment crop, or auto with cnn and resnet; image folders crop as RandomResizedCrop)"},
	{"val-data", func(c *Config) any { return c.Data.ValDir }, func(c *Config) bool { return c.Model.Kind != "gpt" }, withModel, "the image models"},
	{"image-size", func(c *Config) any { return c.Data.ImageSize }, func(c *Config) bool { return c.Data.imageFolder() }, withData, "image folders or tar shards (--data DIR with train/ and val/, --val-data, or --data SHARDS.tar)"},
	{"resize", func(c *Config) any { return c.Data.Resize }, func(c *Config) bool { return c.Data.imageFolder() }, withData, "image folders or tar shards (--data DIR with train/ and val/, --val-data, or --data SHARDS.tar)"},
	{"mean", func(c *Config) any { return c.Data.Mean }, func(c *Config) bool { return c.Data.imageFolder() }, withData, "image folders or tar shards (--data DIR with train/ and val/, --val-data, or --data SHARDS.tar)"},
	{"std", func(c *Config) any { return c.Data.Std }, func(c *Config) bool { return c.Data.imageFolder() }, withData, "image folders or tar shards (--data DIR with train/ and val/, --val-data, or --data SHARDS.tar)"},
	{"skip-bad", func(c *Config) any { return c.Data.SkipBad }, func(c *Config) bool { return c.Data.imageFolder() }, withData, "image folders or tar shards (--data DIR with train/ and val/, --val-data, or --data SHARDS.tar)"},
	{"shuffle-buffer", func(c *Config) any { return c.Data.ShuffleBuffer }, func(c *Config) bool { return c.Data.tarShards() && !c.Data.Ordered }, withData,
		"tar shards read shuffled (--data SHARDS.tar, not with --shuffle=false)"},
	{"flight-dir", func(c *Config) any { return c.Observe.FlightDir }, func(c *Config) bool { return c.Observe.FlightEvents > 0 },
		func(c *Config) string { return "--flight-events 0" }, "the flight recorder's dumps (--flight-events above 0)"},
	{"sample-log", func(c *Config) any { return c.Observe.SampleLog }, func(c *Config) bool { return c.Data.imageFolder() }, withData,
		"image folders and tar shards, whose samples have names"},
	{"data-workers", func(c *Config) any { return c.Data.Workers }, func(c *Config) bool { return c.Data.imageFolder() }, withData, "image folders or tar shards (--data DIR with train/ and val/, --val-data, or --data SHARDS.tar)"},
	{"momentum", func(c *Config) any { return c.Optim.Momentum }, func(c *Config) bool { return c.Optim.Optimizer == "sgd" }, withOptimizer, "--optimizer sgd"},
	{"nesterov", func(c *Config) any { return c.Optim.Nesterov }, func(c *Config) bool { return c.Optim.Optimizer == "sgd" }, withOptimizer, "--optimizer sgd"},
	{"beta1", func(c *Config) any { return c.Optim.Beta1 }, func(c *Config) bool { return c.Optim.Optimizer != "sgd" }, withOptimizer, "--optimizer adam or adamw"},
	{"beta2", func(c *Config) any { return c.Optim.Beta2 }, func(c *Config) bool { return c.Optim.Optimizer != "sgd" }, withOptimizer, "--optimizer adam or adamw"},
	{"eps", func(c *Config) any { return c.Optim.Eps }, func(c *Config) bool { return c.Optim.Optimizer != "sgd" }, withOptimizer, "--optimizer adam or adamw"},
	{"lr-step-epochs", func(c *Config) any { return c.Optim.StepEpochs }, func(c *Config) bool { return c.Optim.Schedule == "step" }, withSchedule, "--lr-schedule step"},
	{"lr-decay-steps", func(c *Config) any { return c.Optim.DecaySteps }, func(c *Config) bool { return c.Optim.Schedule == "cosine" }, withSchedule, "--lr-schedule cosine"},
	{"decay-all", func(c *Config) any { return c.Optim.DecayAll }, func(c *Config) bool { return c.Model.Kind == "gpt" }, withModel,
		"--model gpt (the other models decay every parameter, as torch.optim does)"},
	{"lr-gamma", func(c *Config) any { return c.Optim.Gamma }, func(c *Config) bool { return c.Optim.Schedule == "step" }, withSchedule, "--lr-schedule step"},
	{"allreduce", func(c *Config) any { return c.Dist.Allreduce }, func(c *Config) bool { return !c.Dist.Strategy.servers() }, withStrategy,
		"the strategies that average over the ranks (allreduce, local-sgd); parameter servers take the gradients instead"},
	{"bucket-mb", func(c *Config) any { return c.Dist.Buckets }, func(c *Config) bool { return c.Dist.Strategy == AllreduceStrategy }, withStrategy, "--strategy allreduce's gradient buckets"},
	{"overlap", func(c *Config) any { return c.Dist.Overlap }, func(c *Config) bool { return c.Dist.Strategy == AllreduceStrategy }, withStrategy, "--strategy allreduce's gradient buckets"},
	{"checkpoint-format", func(c *Config) any { return c.Checkpoint.Format }, func(c *Config) bool { return c.Checkpoint.Dir != "" }, withCheckpoints, "--checkpoint-dir"},
	{"schedule", func(c *Config) any { return c.Dist.Schedule }, func(c *Config) bool { return c.Dist.Pipeline > 1 }, withPipeline, "--pipeline P with P > 1"},
	{"stages", func(c *Config) any { return c.Dist.Stages }, func(c *Config) bool { return c.Dist.Pipeline > 1 }, withPipeline, "--pipeline P with P > 1"},
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

func withCheckpoints(c *Config) string { return "no --checkpoint-dir" }
func withPipeline(c *Config) string    { return fmt.Sprintf("--pipeline %d", max(c.Dist.Pipeline, 1)) }

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
	case c.Device.Device == CUDA && c.Data.MicroBatches > 1:
		return fmt.Errorf("--micro-batches %d with --device cuda: the GPU path runs whole batches so far; drop it or train on the CPU", c.Data.MicroBatches)
	case c.Data.GlobalBatch > 0 && c.Optim.LinearScaling:
		return fmt.Errorf("--lr-scaling linear with --global-batch %d: --lr is the rate for the global batch, which stays the same at any number of ranks; drop --lr-scaling", c.Data.GlobalBatch)
	case d.Zero < 0 || d.Zero > 3:
		return fmt.Errorf("--zero %d: choose 0 (full replicas), 1 (optimizer state sharded), 2 (and gradients) or 3 (and parameters)", d.Zero)
	case d.Zero > 0 && d.Strategy != AllreduceStrategy:
		return fmt.Errorf("--zero %d with --strategy %s: ZeRO shards the state of --strategy allreduce's replicas; drop --zero or use --strategy allreduce", d.Zero, d.Strategy)
	case d.Zero > 0 && c.Device.Device == CUDA:
		return fmt.Errorf("--zero %d with --device cuda: the GPU path has no ZeRO yet (issue 21); train on the CPU", d.Zero)
	case d.Zero > 0 && (d.Allreduce != Ring || d.Compress != mpi.None):
		return fmt.Errorf("--zero %d with --allreduce %s --compress %s: ZeRO's reduce-scatter and all-gather are the ring's halves in float32; use --allreduce ring and no --compress", d.Zero, d.Allreduce, d.Compress)
	case d.Pipeline < 0 || (c.Set["pipeline"] && d.Pipeline < 1):
		return fmt.Errorf("--pipeline %d: must be at least 1 (1: no pipeline)", d.Pipeline)
	case d.TensorParallel < 0 || (c.Set["tensor-parallel"] && d.TensorParallel < 1):
		return fmt.Errorf("--tensor-parallel %d: must be at least 1 (1: no split)", d.TensorParallel)
	case d.gridded() && c.Device.Device == CUDA:
		return fmt.Errorf("--pipeline and --tensor-parallel with --device cuda: the GPU path has no model parallelism yet (issue 21); train on the CPU")
	case d.gridded() && d.Strategy != AllreduceStrategy:
		return fmt.Errorf("--pipeline and --tensor-parallel with --strategy %s: a split model trains with --strategy allreduce among the replicas of each part", d.Strategy)
	case d.Pipeline > 1 && c.Data.MicroBatches > 1 && c.Data.BatchSize%c.Data.MicroBatches != 0:
		return fmt.Errorf("--micro-batches %d does not divide --batch-size %d: each micro-batch must have the same number of samples", c.Data.MicroBatches, c.Data.BatchSize)
	case d.TensorParallel > 1 && c.Model.Kind != "gpt":
		return fmt.Errorf("--tensor-parallel %d with --model %s: tensor parallelism splits the transformer's heads and MLP; use --model gpt, or --pipeline for %s", d.TensorParallel, c.Model.Kind, c.Model.Kind)
	case d.TensorParallel > 1 && c.Model.Heads%d.TensorParallel != 0:
		return fmt.Errorf("--tensor-parallel %d does not divide --heads %d: each shard takes whole heads; use a divisor of %d", d.TensorParallel, c.Model.Heads, c.Model.Heads)
	case c.Model.Kind == "gpt" && c.Data.Dir == "synthetic":
		return fmt.Errorf("--model gpt --data synthetic: a language model trains on token shards; make them with train tokenize and pass their directory")
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
