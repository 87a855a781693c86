package main

import (
	"math"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"train/trainer"
)

// Every flag is defined here, once, with its default, its usage and the
// environment variable that sets it (how Slurm and Kubernetes users
// configure jobs); a flag on the command line wins over the variable.

func env(name string) []string { return []string{"TRAIN_" + name} }

const (
	catModel = "Model and data"
	catOptim = "Optimisation"
	catDist  = "Distribution"
	catCkpt  = "Checkpoints and logging"
)

var (
	modelFlag   = &cli.StringFlag{Name: "model", Value: "mlp", Usage: "network to train: mlp, cnn or resnet", EnvVars: env("MODEL"), Category: catModel}
	hiddenFlag  = &cli.IntSliceFlag{Name: "hidden", Value: cli.NewIntSlice(256), Usage: "MLP hidden layer sizes, comma-separated", EnvVars: env("HIDDEN"), Category: catModel}
	depthFlag   = &cli.IntFlag{Name: "depth", Value: 20, Usage: "ResNet depth, 6n+2: 20, 32, 44, 56, 110", EnvVars: env("DEPTH"), Category: catModel}
	dataFlag    = &cli.StringFlag{Name: "data", Value: "/usr/share/datasets/fashion-mnist", Usage: "dataset: a directory of MNIST-format IDX files (raw or .gz) or of CIFAR-10 binary batches, or \"synthetic\"", EnvVars: env("DATA"), Category: catModel}
	synShape    = &cli.StringFlag{Name: "synthetic-shape", Value: "3x32x32", Usage: "--data synthetic: image shape CxHxW", EnvVars: env("SYNTHETIC_SHAPE"), Category: catModel}
	synSamples  = &cli.IntFlag{Name: "synthetic-samples", Value: 50000, Usage: "--data synthetic: training samples (the test set is a tenth)", EnvVars: env("SYNTHETIC_SAMPLES"), Category: catModel}
	augFlag     = &cli.StringFlag{Name: "augment", Value: "auto", Usage: "training augmentation: crop and/or flip (comma-separated), none, or auto (crop,flip for cnn and resnet, none for mlp)", EnvVars: env("AUGMENT"), Category: catModel}
	cropPadFlag = &cli.IntFlag{Name: "crop-pad", Value: 4, Usage: "random crop: pad each side by this many pixels first", EnvVars: env("CROP_PAD"), Category: catModel}

	batchFlag  = &cli.IntFlag{Name: "batch-size", Value: 64, Usage: "samples per step per rank; the global batch is this x the number of ranks", EnvVars: env("BATCH_SIZE"), Category: catOptim}
	evalBatch  = &cli.IntFlag{Name: "eval-batch", Value: 0, Usage: "samples per evaluation pass per rank (0: --batch-size)", EnvVars: env("EVAL_BATCH"), Category: catOptim}
	epochsFlag = &cli.IntFlag{Name: "epochs", Value: 5, Usage: "passes over the training set; also the length the schedule plans for", EnvVars: env("EPOCHS"), Category: catOptim}
	stepsFlag  = &cli.IntFlag{Name: "max-steps", Value: 0, Usage: "stop after this many steps in all (0: no limit)", EnvVars: env("MAX_STEPS"), Category: catOptim}
	optFlag    = &cli.StringFlag{Name: "optimizer", Value: "sgd", Usage: "sgd, adam or adamw", EnvVars: env("OPTIMIZER"), Category: catOptim}
	lrFlag     = &cli.Float64Flag{Name: "lr", Value: 0.05, Usage: "learning rate, for one rank's batch unless --lr-scaling linear", EnvVars: env("LR"), Category: catOptim}
	scaleFlag  = &cli.StringFlag{Name: "lr-scaling", Value: "none", Usage: "none, or linear: lr x number of ranks (Goyal et al. 2017)", EnvVars: env("LR_SCALING"), Category: catOptim}
	schedFlag  = &cli.StringFlag{Name: "lr-schedule", Value: "cosine", Usage: "constant, step, or cosine (to zero at the end of --epochs)", EnvVars: env("LR_SCHEDULE"), Category: catOptim}
	warmFlag   = &cli.IntFlag{Name: "warmup-steps", Value: 0, Usage: "linear learning-rate warm-up over the first N steps", EnvVars: env("WARMUP_STEPS"), Category: catOptim}
	stepEpochs = &cli.IntFlag{Name: "lr-step-epochs", Value: 30, Usage: "--lr-schedule step: epochs between decays", EnvVars: env("LR_STEP_EPOCHS"), Category: catOptim}
	gammaFlag  = &cli.Float64Flag{Name: "lr-gamma", Value: 0.1, Usage: "--lr-schedule step: factor of each decay", EnvVars: env("LR_GAMMA"), Category: catOptim}
	momFlag    = &cli.Float64Flag{Name: "momentum", Value: 0.9, Usage: "SGD momentum", EnvVars: env("MOMENTUM"), Category: catOptim}
	nestFlag   = &cli.BoolFlag{Name: "nesterov", Usage: "SGD with Nesterov momentum", EnvVars: env("NESTEROV"), Category: catOptim}
	wdFlag     = &cli.Float64Flag{Name: "weight-decay", Value: 0, Usage: "weight decay (L2 for sgd and adam, decoupled for adamw)", EnvVars: env("WEIGHT_DECAY"), Category: catOptim}
	beta1Flag  = &cli.Float64Flag{Name: "beta1", Value: 0.9, Usage: "Adam beta1", EnvVars: env("BETA1"), Category: catOptim}
	beta2Flag  = &cli.Float64Flag{Name: "beta2", Value: 0.999, Usage: "Adam beta2", EnvVars: env("BETA2"), Category: catOptim}
	epsFlag    = &cli.Float64Flag{Name: "eps", Value: 1e-8, Usage: "Adam epsilon", EnvVars: env("EPS"), Category: catOptim}
	clipFlag   = &cli.Float64Flag{Name: "clip-grad-norm", Value: 0, Usage: "scale gradients to at most this L2 norm (0: off)", EnvVars: env("CLIP_GRAD_NORM"), Category: catOptim}
	seedFlag   = &cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the initial parameters, the data order and augmentation", EnvVars: env("SEED"), Category: catOptim}

	compressFlag = &cli.StringFlag{Name: "compress", Value: "none", Usage: "gradients on the wire as fp16 or bf16, reduced in float32 (ring, hier; Horovod's Compression.fp16), or none", EnvVars: env("COMPRESS"), Category: catDist}
	arFlag       = &cli.StringFlag{Name: "allreduce", Value: "ring", Usage: "gradient allreduce: ring (ours, reduce-scatter + all-gather; on GPUs over CUDA IPC or pinned host buffers), mpi (MPI_Allreduce), hier (reduce within each host, ring among hosts, broadcast within the host) or nccl (--device cuda)", EnvVars: env("ALLREDUCE"), Category: catDist}
	bucketFlag   = &cli.StringFlag{Name: "bucket-mb", Value: "25", Usage: "gradient bucket size in MiB, whole tensors in backward order (0: one bucket), or auto: try 1/4 to 64 MiB in the first steps and keep the fastest", EnvVars: env("BUCKET_MB"), Category: catDist}
	deviceFlag   = &cli.StringFlag{Name: "device", Value: "cpu", Usage: "where to train: cpu, or cuda (the GPU of local rank % GPUs; CUDA is opened at run time)", EnvVars: env("DEVICE"), Category: catDist}
	precFlag     = &cli.StringFlag{Name: "precision", Value: "fp32", Usage: "cuda: fp32, tf32 (tensor cores, 10-bit mantissas) or bf16 (tensor cores on bfloat16 inputs; fp32 master weights)", EnvVars: env("PRECISION"), Category: catDist}
	strategyFlag = &cli.StringFlag{Name: "strategy", Value: "allreduce", Usage: "how replicas stay in step: allreduce (gradients every step), ps-sync or ps-async (parameter servers, --servers, --staleness) or local-sgd (local steps, parameters and optimizer state averaged every --sync-every steps)", EnvVars: env("STRATEGY"), Category: catDist}
	serversFlag  = &cli.IntFlag{Name: "servers", Value: 1, Usage: "ps-sync, ps-async: parameter servers, the last ranks (the rest are workers)", EnvVars: env("SERVERS"), Category: catDist}
	colocateFlag = &cli.BoolFlag{Name: "colocate", Usage: "ps-sync, ps-async: run the --servers servers beside workers, in ranks 0..K-1 (SINGA's server_worker_separate: false), instead of on ranks of their own", EnvVars: env("COLOCATE"), Category: catDist}
	staleFlag    = &cli.IntFlag{Name: "staleness", Value: 4, Usage: "ps-async: updates a worker may run ahead of the slowest (0: synchronous rounds, -1: no bound)", EnvVars: env("STALENESS"), Category: catDist}
	syncEvery    = &cli.IntFlag{Name: "sync-every", Value: 8, Usage: "local-sgd: average the replicas every N steps (1: every step)", EnvVars: env("SYNC_EVERY"), Category: catDist}
	overlapFlag  = &cli.BoolFlag{Name: "overlap", Value: true, Usage: "allreduce each bucket while backward computes the layers below it (--overlap=false: after backward)", EnvVars: env("OVERLAP"), Category: catDist}
	bnFlag       = &cli.StringFlag{Name: "bn", Value: "sync", Usage: "BatchNorm statistics: sync (over the global batch, all ranks) or local (per rank, averaged for evaluation and checkpoints)", EnvVars: env("BN"), Category: catDist}
	threadsFlag  = &cli.IntFlag{Name: "threads", Value: 0, Usage: "BLAS threads per rank (0: the cores this rank is bound to, or the node's cores / ranks on the node)", EnvVars: env("THREADS"), Category: catDist}

	metricsFlag  = &cli.StringFlag{Name: "metrics-addr", Value: ":9400", Usage: "serve Prometheus /metrics on HOST:PORT, each rank on PORT + its local rank (\"\": off)", EnvVars: env("METRICS_ADDR"), Category: catCkpt}
	pushFlag     = &cli.StringFlag{Name: "pushgateway", Usage: "Prometheus Pushgateway URL: rank 0 pushes its metrics at the end (job train, or train_slurm_<id> in Slurm)", EnvVars: env("PUSHGATEWAY"), Category: catCkpt}
	pushEvery    = &cli.IntFlag{Name: "pushgateway-every", Value: 0, Usage: "also push to the Pushgateway every N steps (0: only at the end)", EnvVars: env("PUSHGATEWAY_EVERY"), Category: catCkpt}
	psPushFlag   = &cli.IntFlag{Name: "push-every", Value: 1, Usage: "ps-async: push the summed gradients every N steps (Downpour's n_push)", EnvVars: env("PUSH_EVERY"), Category: catDist}
	psFetchFlag  = &cli.IntFlag{Name: "fetch-every", Value: 1, Usage: "ps-async: fetch the parameters every N steps (Downpour's n_fetch)", EnvVars: env("FETCH_EVERY"), Category: catDist}
	timelineFlag = &cli.StringFlag{Name: "timeline", Usage: "write a Chrome trace (Perfetto, chrome://tracing) per rank: FILE.rankN.json", EnvVars: env("TIMELINE"), Category: catCkpt}
	logFileFlag  = &cli.StringFlag{Name: "log-file", Usage: "rank 0 writes one JSON record per log line and evaluation (train plot reads it)", EnvVars: env("LOG_FILE"), Category: catCkpt}
	progressFlag = &cli.StringFlag{Name: "progress", Value: "auto", Usage: "rank 0's live progress bar: auto (a terminal, not under mpirun or srun, which give ranks a terminal even when logging to a file), always, never", EnvVars: env("PROGRESS"), Category: catCkpt}
	plotFlag     = &cli.StringFlag{Name: "plot", Usage: "write the run's curves to this PNG at the end", EnvVars: env("PLOT"), Category: catCkpt}

	stallWarn    = &cli.DurationFlag{Name: "stall-warn", Value: 60 * time.Second, Usage: "rank 0 reports ranks missing from a collective others have waited in this long (0: no watchdog)", EnvVars: env("STALL_WARN"), Category: catDist}
	stallTimeout = &cli.DurationFlag{Name: "stall-timeout", Value: 30 * time.Minute, Usage: "abort the job when a collective has waited this long (0: never)", EnvVars: env("STALL_TIMEOUT"), Category: catDist}

	ckDirFlag  = &cli.StringFlag{Name: "checkpoint-dir", Usage: "directory for rank 0's checkpoints (safetensors); also written at the end", EnvVars: env("CHECKPOINT_DIR"), Category: catCkpt}
	ckEvery    = &cli.IntFlag{Name: "checkpoint-every", Value: 0, Usage: "write a checkpoint every N steps (0: only at the end)", EnvVars: env("CHECKPOINT_EVERY"), Category: catCkpt}
	keepFlag   = &cli.IntFlag{Name: "keep", Value: 3, Usage: "keep the newest N checkpoints (0: all)", EnvVars: env("KEEP"), Category: catCkpt}
	resumeFlag = &cli.BoolFlag{Name: "resume", Usage: "continue from the newest checkpoint in --checkpoint-dir (from scratch if there is none)", EnvVars: env("RESUME"), Category: catCkpt}
	logFlag    = &cli.IntFlag{Name: "log-every", Value: 100, Usage: "rank 0 logs a line every N steps", EnvVars: env("LOG_EVERY"), Category: catCkpt}
)

var trainFlags = []cli.Flag{
	modelFlag, hiddenFlag, depthFlag, dataFlag, synShape, synSamples, augFlag, cropPadFlag,
	batchFlag, evalBatch, epochsFlag, stepsFlag, optFlag, lrFlag, scaleFlag, schedFlag, warmFlag, stepEpochs, gammaFlag,
	momFlag, nestFlag, wdFlag, beta1Flag, beta2Flag, epsFlag, clipFlag, seedFlag,
	deviceFlag, precFlag, strategyFlag, syncEvery, serversFlag, colocateFlag, staleFlag, psPushFlag, psFetchFlag, arFlag, compressFlag, bucketFlag, overlapFlag, bnFlag, threadsFlag, stallWarn, stallTimeout,
	ckDirFlag, ckEvery, keepFlag, resumeFlag, logFlag,
	metricsFlag, pushFlag, pushEvery, timelineFlag, logFileFlag, plotFlag, progressFlag,
}

// trainConfig reads the training flags.
func trainConfig(c *cli.Context) trainer.Config {
	return trainer.Config{
		Model: c.String(modelFlag.Name), Hidden: c.IntSlice(hiddenFlag.Name), Depth: c.Int(depthFlag.Name),
		DataDir: c.String(dataFlag.Name), SyntheticShape: c.String(synShape.Name), SyntheticSamples: c.Int(synSamples.Name),
		Augment: c.String(augFlag.Name), CropPad: c.Int(cropPadFlag.Name),
		BatchSize: c.Int(batchFlag.Name), EvalBatch: c.Int(evalBatch.Name), Epochs: c.Int(epochsFlag.Name), MaxSteps: c.Int(stepsFlag.Name),
		Optimizer: c.String(optFlag.Name), LR: c.Float64(lrFlag.Name), LRScaling: c.String(scaleFlag.Name),
		LRSchedule: c.String(schedFlag.Name), WarmupSteps: c.Int(warmFlag.Name), LRStepEpochs: c.Int(stepEpochs.Name), LRGamma: c.Float64(gammaFlag.Name),
		Momentum: c.Float64(momFlag.Name), Nesterov: c.Bool(nestFlag.Name), WeightDecay: c.Float64(wdFlag.Name),
		Beta1: c.Float64(beta1Flag.Name), Beta2: c.Float64(beta2Flag.Name), Eps: c.Float64(epsFlag.Name),
		ClipGradNorm: c.Float64(clipFlag.Name), Seed: c.Uint64(seedFlag.Name),
		Device: c.String(deviceFlag.Name), Precision: c.String(precFlag.Name), Strategy: c.String(strategyFlag.Name), SyncEvery: c.Int(syncEvery.Name), Servers: c.Int(serversFlag.Name), Colocate: c.Bool(colocateFlag.Name), PSPushEvery: c.Int(psPushFlag.Name), PSFetchEvery: c.Int(psFetchFlag.Name), Staleness: c.Int(staleFlag.Name),
		Allreduce: c.String(arFlag.Name), Compress: c.String(compressFlag.Name), BucketMB: bucketMB(c.String(bucketFlag.Name)), BucketAuto: c.String(bucketFlag.Name) == "auto", Overlap: c.Bool(overlapFlag.Name),
		BN: c.String(bnFlag.Name), Threads: c.Int(threadsFlag.Name),
		StallWarn: c.Duration(stallWarn.Name), StallTimeout: c.Duration(stallTimeout.Name),
		CheckpointDir: c.String(ckDirFlag.Name), CheckpointEvery: c.Int(ckEvery.Name), Keep: c.Int(keepFlag.Name),
		Resume: c.Bool(resumeFlag.Name), LogEvery: c.Int(logFlag.Name),
		MetricsAddr: c.String(metricsFlag.Name), Pushgateway: c.String(pushFlag.Name), PushgatewayEvery: c.Int(pushEvery.Name),
		Timeline: c.String(timelineFlag.Name), LogFile: c.String(logFileFlag.Name), Plot: c.String(plotFlag.Name),
		Progress: c.String(progressFlag.Name),
		Fault:    os.Getenv(trainer.FaultEnv), // tests only: not a flag
	}
}

// bucketMB reads --bucket-mb: a number, or auto (0 here: the tuner picks),
// or NaN for anything else, which Config.Validate reports.
func bucketMB(s string) float64 {
	if s == "auto" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}
