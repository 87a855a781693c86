package trainer

import (
	"strings"
	"testing"
	"time"

	"train/model"
	"train/mpi"
)

// valid is a configuration every check accepts: the flags' defaults.
func valid() Config {
	return Config{
		Model: ModelOptions{Kind: "mlp", Hidden: []int{256}, Depth: 20},
		Data:  DataOptions{Dir: "/data", SyntheticShape: "3x32x32", SyntheticSamples: 50000, Augment: Augment{Auto: true}, CropPad: 4, BatchSize: 64},
		Optim: OptimOptions{Optimizer: "sgd", LR: 0.05, Schedule: "cosine", StepEpochs: 30, Gamma: 0.1, Momentum: 0.9,
			Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Epochs: 5, Seed: 1},
		Dist: DistOptions{Buckets: Buckets{MiB: 25}, Overlap: true, SyncEvery: 8, Servers: 1, Staleness: 4, PushEvery: 1, FetchEvery: 1,
			StallWarn: time.Minute, StallTimeout: 30 * time.Minute},
		Device:     DeviceOptions{Precision: "fp32", GPURing: "auto"},
		Observe:    ObserveOptions{MetricsAddr: ":9400", LogEvery: 100},
		Checkpoint: CheckpointOptions{Keep: 3},
		Set:        map[string]bool{},
	}
}

// TestValidate: each group refuses what it must, naming the option, and
// the combinations refuse options the other choices would ignore.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string // in the error; "" means valid
	}{
		{"defaults", func(c *Config) {}, ""},
		// model
		{"unknown model", func(c *Config) { c.Model.Kind = "transformer" }, `unknown model "transformer": choose mlp, cnn, resnet, resnet-cifar or gpt`},
		{"hidden size 0", func(c *Config) { c.Model.Hidden = []int{0} }, "--hidden [0]"},
		{"resnet depth", func(c *Config) { c.Model.Kind, c.Model.Depth = "resnet", 21 }, "--depth 21"},
		{"resnet depth 8", func(c *Config) { c.Model.Kind, c.Model.Depth = "resnet", 8 }, ""},
		{"torchvision depth", func(c *Config) { c.Model.Kind, c.Model.Depth = "resnet", 50 }, ""},
		{"cifar depth 18", func(c *Config) { c.Model.Kind, c.Model.Depth = "resnet-cifar", 18 }, "--depth 18: a CIFAR ResNet has depth 6n+2"},
		{"std zero", func(c *Config) { c.Data.Std = [3]float32{0.5, 0, 0.5} }, "--std [0.5 0 0.5]: every channel's must be positive"},
		{"resnet depth 19", func(c *Config) { c.Model.Kind, c.Model.Depth = "resnet", 19 }, "torchvision's ResNets have depth 18, 34, 50, 101 or 152"},
		{"gpt", func(c *Config) {
			c.Model.Kind, c.Model.Layers, c.Model.Heads, c.Model.Dim, c.Model.Context = "gpt", 2, 2, 8, 16
		}, ""},
		{"gpt heads", func(c *Config) {
			c.Model.Kind, c.Model.Layers, c.Model.Heads, c.Model.Dim, c.Model.Context = "gpt", 2, 3, 8, 16
		}, "--heads 3 does not divide --dim 8"},
		{"gpt sizes", func(c *Config) {
			c.Model.Kind, c.Model.Layers, c.Model.Heads, c.Model.Dim, c.Model.Context = "gpt", 0, 2, 8, 16
		}, "--layers 0"},
		{"gpt vocab", func(c *Config) {
			c.Model.Kind, c.Model.Layers, c.Model.Heads, c.Model.Dim, c.Model.Context, c.Model.Vocab = "gpt", 1, 1, 8, 16, 70000
		}, "--vocab 70000"},
		{"micro-batches on cuda", func(c *Config) { c.Device.Device, c.Data.BatchSize, c.Data.MicroBatches = CUDA, 8, 2 }, "--micro-batches 2 with --device cuda"},
		{"layers with the MLP", func(c *Config) { c.Set["layers"] = true }, "--layers 0 is not used with --model mlp"},
		// data
		{"batch 0", func(c *Config) { c.Data.BatchSize = 0 }, "--batch-size 0"},
		{"eval batch", func(c *Config) { c.Data.EvalBatch = -1 }, "--eval-batch -1"},
		{"crop pad", func(c *Config) { c.Data.CropPad = -1 }, "--crop-pad -1"},
		{"micro-batches negative", func(c *Config) { c.Data.MicroBatches = -1 }, "--micro-batches -1: must not be negative"},
		{"micro-batches not dividing", func(c *Config) { c.Data.BatchSize, c.Data.MicroBatches = 8, 3 }, "--micro-batches 3 does not divide --batch-size 8"},
		{"synthetic samples", func(c *Config) { c.Data.Dir, c.Data.SyntheticSamples = "synthetic", 0 }, "--synthetic-samples 0"},
		// optimizer
		{"epochs", func(c *Config) { c.Optim.Epochs = 0 }, "--epochs 0"},
		{"max steps", func(c *Config) { c.Optim.MaxSteps = -1 }, "--max-steps -1"},
		{"lr 0", func(c *Config) { c.Optim.LR = 0 }, "--lr 0"},
		{"momentum 1", func(c *Config) { c.Optim.Momentum = 1 }, "--momentum 1"},
		{"weight decay", func(c *Config) { c.Optim.WeightDecay = -1 }, "--weight-decay -1"},
		{"clip", func(c *Config) { c.Optim.ClipGradNorm = -1 }, "--clip-grad-norm -1"},
		{"optimizer", func(c *Config) { c.Optim.Optimizer = "lion" }, `unknown --optimizer "lion"`},
		{"schedule", func(c *Config) { c.Optim.Schedule = "linear" }, `unknown --lr-schedule "linear"`},
		{"step schedule", func(c *Config) { c.Optim.Schedule, c.Optim.StepEpochs = "step", 0 }, "--lr-step-epochs"},
		{"warmup", func(c *Config) { c.Optim.WarmupSteps = -1 }, "--warmup-steps -1"},
		{"decay steps", func(c *Config) { c.Optim.DecaySteps = -1 }, "--lr-decay-steps -1"},
		{"decay steps in the warm-up", func(c *Config) { c.Optim.DecaySteps, c.Optim.WarmupSteps = 10, 10 }, "--lr-decay-steps 10 is not longer than --warmup-steps 10"},
		{"decay steps with step", func(c *Config) {
			c.Optim.Schedule, c.Optim.DecaySteps, c.Set["lr-decay-steps"] = "step", 100, true
		}, "--lr-decay-steps 100 is not used with --lr-schedule step"},
		{"decay all without decay", func(c *Config) {
			c.Model.Kind, c.Model.Layers, c.Model.Heads, c.Model.Dim, c.Model.Context = "gpt", 2, 2, 8, 16
			c.Optim.DecayAll, c.Set["decay-all"] = true, true
		}, "--decay-all without --weight-decay"},
		{"decay all with the MLP", func(c *Config) {
			c.Optim.DecayAll, c.Optim.WeightDecay, c.Set["decay-all"] = true, 0.1, true
		}, "--decay-all true is not used with --model mlp"},
		{"eval every", func(c *Config) { c.Observe.EvalEvery = -1 }, "--eval-every -1"},
		// distribution
		{"sync every", func(c *Config) { c.Dist.SyncEvery = 0 }, "--sync-every 0"},
		{"servers", func(c *Config) { c.Dist.Servers = 0 }, "--servers 0"},
		{"staleness", func(c *Config) { c.Dist.Staleness = -2 }, "--staleness -2"},
		{"push every", func(c *Config) { c.Dist.PushEvery = 0 }, "--push-every 0"},
		{"stall", func(c *Config) { c.Dist.StallTimeout = time.Second }, "--stall-timeout 1s is shorter"},
		// device
		{"threads", func(c *Config) { c.Device.Threads = -1 }, "--threads -1"},
		{"threads above the pool's", func(c *Config) { c.Device.Threads = 257 }, "--threads 257: at most 256"},
		{"bf16 on the CPU", func(c *Config) { c.Device.Precision = "bf16" }, "--precision bf16 is for --device cuda"},
		{"gpu ring", func(c *Config) { c.Device.GPURing = "nvlink" }, `--gpu-ring "nvlink"`},
		{"gemm", func(c *Config) { c.Device.Gemm = "mkl" }, `--gemm "mkl": choose blas, amx or avx512`},
		{"gemm avx512 on cuda", func(c *Config) { c.Device.Device, c.Device.Gemm = CUDA, "avx512" }, "--gemm avx512 is for the CPU path"},
		{"gemm amx on cuda", func(c *Config) { c.Device.Device, c.Device.Gemm = CUDA, "amx" }, "--gemm amx is for the CPU path"},
		// observation and checkpoints
		{"log every", func(c *Config) { c.Observe.LogEvery = 0 }, "--log-every 0"},
		{"pushgateway URL", func(c *Config) { c.Observe.Pushgateway = "gateway:9091" }, `--pushgateway "gateway:9091"`},
		{"pushgateway every", func(c *Config) { c.Observe.PushgatewayEvery = -1 }, "--pushgateway-every -1"},
		{"plot not PNG", func(c *Config) { c.Observe.Plot = "curves.svg" }, "--plot curves.svg: only PNG"},
		{"flight dir without the recorder", func(c *Config) { c.Observe.FlightDir, c.Set["flight-dir"] = "fl", true },
			"--flight-dir fl is not used with --flight-events 0"},
		{"flight dir with the recorder", func(c *Config) { c.Observe.FlightDir, c.Observe.FlightEvents, c.Set["flight-dir"] = "fl", 4096, true }, ""},
		{"plot PNG in capitals", func(c *Config) { c.Observe.Plot = "CURVES.PNG" }, ""},
		{"checkpoint every", func(c *Config) { c.Checkpoint.Every = -1 }, "--checkpoint-every -1"},
		{"keep", func(c *Config) { c.Checkpoint.Keep = -1 }, "--keep -1"},
		{"resume without dir", func(c *Config) { c.Checkpoint.Resume = true }, "--resume needs --checkpoint-dir"},
		// combinations
		{"nccl on the CPU", func(c *Config) { c.Dist.Allreduce = NCCL }, "--allreduce nccl needs --device cuda"},
		{"cuda local-sgd", func(c *Config) { c.Device.Device, c.Dist.Strategy = CUDA, LocalSGD }, "--device cuda with --strategy local-sgd"},
		{"cuda hier", func(c *Config) { c.Device.Device, c.Dist.Allreduce = CUDA, Hier }, "--allreduce hier and --compress are CPU-path"},
		{"compress mpi", func(c *Config) { c.Dist.Compress, c.Dist.Allreduce = mpi.FP16, MPIAllreduce }, "--compress fp16"},
		{"compress local-sgd", func(c *Config) { c.Dist.Compress, c.Dist.Strategy = mpi.BF16, LocalSGD }, "--compress bf16"},
		{"clip with servers", func(c *Config) { c.Optim.ClipGradNorm, c.Dist.Strategy = 1, PSSync }, "--clip-grad-norm with --strategy ps-sync"},
		{"bn sync under local-sgd", func(c *Config) { c.Dist.Strategy, c.Dist.BN, c.Set["bn"] = LocalSGD, BNSync, true }, "--bn sync with --strategy local-sgd"},
		{"bn sync under ps-sync", func(c *Config) { c.Dist.Strategy, c.Dist.BN, c.Set["bn"] = PSSync, BNSync, true }, ""},
		{"bn local under ps-async", func(c *Config) { c.Dist.Strategy, c.Dist.BN, c.Set["bn"] = PSAsync, BNLocal, true }, ""},
		// options the other choices would ignore
		{"allreduce under ps-sync", func(c *Config) { c.Dist.Strategy, c.Set["allreduce"] = PSSync, true }, "--allreduce ring is not used with --strategy ps-sync: it is for the strategies that average"},
		{"allreduce under local-sgd", func(c *Config) { c.Dist.Strategy, c.Set["allreduce"] = LocalSGD, true }, ""},
		{"staleness under ps-sync", func(c *Config) { c.Dist.Strategy, c.Set["staleness"] = PSSync, true }, "--staleness 4 is not used with --strategy ps-sync: it is for --strategy ps-async"},
		{"staleness under ps-async", func(c *Config) { c.Dist.Strategy, c.Set["staleness"] = PSAsync, true }, ""},
		{"servers under allreduce", func(c *Config) { c.Set["servers"] = true }, "--servers 1 is not used with --strategy allreduce"},
		{"sync-every under allreduce", func(c *Config) { c.Set["sync-every"] = true }, "--sync-every 8 is not used with --strategy allreduce: it is for --strategy local-sgd"},
		{"bucket-mb under local-sgd", func(c *Config) { c.Dist.Strategy, c.Set["bucket-mb"] = LocalSGD, true }, "--bucket-mb 25 is not used with --strategy local-sgd"},
		{"overlap under ps-async", func(c *Config) { c.Dist.Strategy, c.Set["overlap"] = PSAsync, true }, "--overlap true is not used with --strategy ps-async"},
		{"colocate under allreduce", func(c *Config) { c.Set["colocate"] = true }, "--colocate false is not used with --strategy allreduce"},
		{"push-every under ps-sync", func(c *Config) { c.Dist.Strategy, c.Set["push-every"] = PSSync, true }, "--push-every 1 is not used with --strategy ps-sync: it is for --strategy ps-async: Downpour's n_push"},
		{"momentum with adam", func(c *Config) { c.Optim.Optimizer, c.Set["momentum"] = "adam", true }, "--momentum 0.9 is not used with --optimizer adam: it is for --optimizer sgd"},
		{"beta1 with sgd", func(c *Config) { c.Set["beta1"] = true }, "--beta1 0.9 is not used with --optimizer sgd"},
		{"lr-gamma with cosine", func(c *Config) { c.Set["lr-gamma"] = true }, "--lr-gamma 0.1 is not used with --lr-schedule cosine"},
		{"synthetic-shape with a directory", func(c *Config) { c.Set["synthetic-shape"] = true }, "--synthetic-shape 3x32x32 is not used with --data /data"},
		{"crop-pad with the MLP", func(c *Config) { c.Set["crop-pad"] = true }, "--crop-pad 4 is not used with --model mlp and --augment auto"},
		{"crop-pad with the CNN", func(c *Config) { c.Model.Kind, c.Set["crop-pad"] = "cnn", true }, ""},
		{"depth with the MLP", func(c *Config) { c.Set["depth"] = true }, "--depth 20 is not used with --model mlp"},
		{"unknown conv", func(c *Config) { c.Model.Kind, c.Model.Conv = "resnet", "fft" }, `--conv "fft": choose im2col or winograd`},
		{"conv with the MLP", func(c *Config) { c.Model.Conv, c.Set["conv"] = "winograd", true }, "--conv winograd is not used with --model mlp"},
		{"conv on the GPU", func(c *Config) {
			c.Model.Kind, c.Model.Conv, c.Device.Device, c.Set["conv"] = "resnet", "winograd", CUDA, true
		}, "--conv winograd is not used with --device cuda"},
		{"conv winograd", func(c *Config) { c.Model.Kind, c.Model.Conv, c.Set["conv"] = "resnet", "winograd", true }, ""},
		{"shuffle-buffer with a folder", func(c *Config) { c.Data.ShuffleBuffer, c.Set["shuffle-buffer"] = 5, true }, "--shuffle-buffer 5 is not used with"},
		{"hidden with the CNN", func(c *Config) { c.Model.Kind, c.Set["hidden"] = "cnn", true }, "--hidden [256] is not used with --model cnn"},
		{"gpu-ring on the CPU", func(c *Config) { c.Set["gpu-ring"] = true }, "--gpu-ring auto is not used with --device cpu --allreduce ring"},
		{"libcuda on the CPU", func(c *Config) { c.Set["libcuda"] = true }, "--libcuda  is not used with --device cpu"},
		{"fault", func(c *Config) { c.Fault = "1:2:explode" }, "TRAIN_FAULT"},
	} {
		c := valid()
		tc.edit(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: accepted, want an error with %q", tc.name, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %q lacks %q", tc.name, err, tc.want)
		}
	}
}

// TestValidateChangesNothing: Validate reads; Defaults writes only what
// was left unset.
func TestValidateChangesNothing(t *testing.T) {
	c := valid()
	c.Validate()
	if c.Data.EvalBatch != 0 || c.Dist.BN != BNAuto {
		t.Errorf("Validate changed the configuration: eval batch %d, bn %v", c.Data.EvalBatch, c.Dist.BN)
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		strategy StrategyKind
		bn, want BNMode
	}{
		{AllreduceStrategy, BNAuto, BNSync},
		{PSSync, BNAuto, BNSync},
		{LocalSGD, BNAuto, BNLocal},
		{PSAsync, BNAuto, BNLocal},
		{AllreduceStrategy, BNLocal, BNLocal}, // what the user set stays
	} {
		c := valid()
		c.Dist.Strategy, c.Dist.BN = tc.strategy, tc.bn
		c.Defaults()
		if c.Dist.BN != tc.want {
			t.Errorf("--strategy %v --bn %v: defaults to %v, want %v", tc.strategy, tc.bn, c.Dist.BN, tc.want)
		}
	}
	c := valid()
	c.Device.Precision = ""
	c.Defaults()
	if c.Data.EvalBatch != 64 || c.Device.Precision != "fp32" {
		t.Errorf("eval batch %d (want the batch, 64), precision %q (want fp32)", c.Data.EvalBatch, c.Device.Precision)
	}
	c.Data.EvalBatch = 10
	c.Defaults()
	if c.Data.EvalBatch != 10 {
		t.Errorf("--eval-batch 10 became %d", c.Data.EvalBatch)
	}
}

// TestParse: every choice reads its spellings and refuses the rest in a
// line naming the option and the choices.
func TestParse(t *testing.T) {
	if s, err := ParseStrategy("ps-async"); s != PSAsync || err != nil || s.String() != "ps-async" {
		t.Errorf("ps-async: %v %v", s, err)
	}
	if _, err := ParseStrategy("gossip"); err == nil || err.Error() != `--strategy "gossip": choose allreduce, local-sgd, ps-sync or ps-async` {
		t.Errorf("gossip: %v", err)
	}
	if a, err := ParseAlgorithm("hier"); a != Hier || err != nil {
		t.Errorf("hier: %v %v", a, err)
	}
	if _, err := ParseAlgorithm("carrier-pigeon"); err == nil || !strings.Contains(err.Error(), `--allreduce "carrier-pigeon"`) {
		t.Errorf("carrier-pigeon: %v", err)
	}
	for s, want := range map[string]Buckets{"auto": {Auto: true}, "0": {}, "0.25": {MiB: 0.25}, "25": {MiB: 25}} {
		if b, err := ParseBuckets(s); b != want || err != nil {
			t.Errorf("--bucket-mb %s: %+v %v", s, b, err)
		}
	}
	for _, bad := range []string{"lots", "-1", "NaN", "Inf", ""} {
		if _, err := ParseBuckets(bad); err == nil || !strings.Contains(err.Error(), "--bucket-mb") {
			t.Errorf("--bucket-mb %q: %v", bad, err)
		}
	}
	for s, want := range map[string]Augment{"auto": {Auto: true}, "none": {}, "crop": {Crop: true}, "crop,flip": {Crop: true, Flip: true}, "flip, crop": {Crop: true, Flip: true}} {
		if a, err := ParseAugment(s); a != want || err != nil {
			t.Errorf("--augment %s: %+v %v", s, a, err)
		}
	}
	if _, err := ParseAugment("rotate"); err == nil {
		t.Error("--augment rotate accepted")
	}
	if l, err := ParseLRScaling("linear"); !l || err != nil {
		t.Errorf("linear: %v %v", l, err)
	}
	if _, err := ParseLRScaling("sqrt"); err == nil {
		t.Error("--lr-scaling sqrt accepted")
	}
	for _, tc := range []struct {
		parse func(string) error
		ok    []string
		bad   string
	}{
		{func(s string) error { _, err := ParseBN(s); return err }, []string{"auto", "sync", "local"}, "global"},
		{func(s string) error { _, err := ParseDevice(s); return err }, []string{"cpu", "cuda"}, "tpu"},
		{func(s string) error { _, err := ParseProgress(s); return err }, []string{"auto", "always", "never"}, "sometimes"},
		{func(s string) error { _, err := ParsePrecision(s); return err }, []string{"fp32", "tf32", "bf16"}, "fp8"},
	} {
		for _, s := range tc.ok {
			if err := tc.parse(s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
		if err := tc.parse(tc.bad); err == nil {
			t.Errorf("%s accepted", tc.bad)
		}
	}
}

// TestVectors: GPT-2's convention decays the matrices and embeddings, not
// the biases and LayerNorm weights: the spans without decay are exactly
// the one-dimensional tensors, merged where they touch.
func TestVectors(t *testing.T) {
	m, err := model.Build(model.Config{Kind: "gpt", Classes: 11, GPT: &model.GPTConfig{Layers: 2, Heads: 2, Dim: 8, Context: 4, Vocab: 11, VocabPadded: 11}})
	if err != nil {
		t.Fatal(err)
	}
	p := m.Params
	nodecay := make([]bool, p.Len())
	for _, s := range vectors(p) {
		for i := s.Lo; i < s.Hi; i++ {
			nodecay[i] = true
		}
	}
	for _, tn := range p.Tensors {
		want := !strings.HasSuffix(tn.Name, "wte.weight") && !strings.HasSuffix(tn.Name, "wpe.weight") &&
			(strings.HasSuffix(tn.Name, ".bias") || strings.Contains(tn.Name, "ln_"))
		for i := tn.Offset; i < tn.Offset+tn.Size; i++ {
			if nodecay[i] != want {
				t.Fatalf("%s %v: without decay %v, want %v", tn.Name, tn.Shape, nodecay[i], want)
			}
		}
	}
}
