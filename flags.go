package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/urfave/cli/v2"

	"train/gpu"
	"train/model"
	"train/mpi"
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
	catGPU   = "GPU"
)

var (
	modelFlag   = &cli.StringFlag{Name: "model", Value: "mlp", Usage: "network to train: mlp, cnn, resnet (--depth: torchvision's at 18, 34, 50, 101, 152; He et al.'s CIFAR ResNet at other depths 6n+2), resnet-cifar (always the CIFAR one), gpt (--layers --heads --dim --context), or a GPT-2 size: gpt2, gpt2-medium, gpt2-large, gpt2-xl", EnvVars: env("MODEL"), Category: catModel}
	hiddenFlag  = &cli.IntSliceFlag{Name: "hidden", Value: cli.NewIntSlice(256), Usage: "MLP hidden layer sizes, comma-separated", EnvVars: env("HIDDEN"), Category: catModel}
	depthFlag   = &cli.IntFlag{Name: "depth", Value: 20, Usage: "ResNet depth: 18, 34, 50, 101, 152 (torchvision's ImageNet ResNets) or 6n+2: 20, 32, 44, 56, 110 (CIFAR)", EnvVars: env("DEPTH"), Category: catModel}
	layersFlag  = &cli.IntFlag{Name: "layers", Value: 6, Usage: "gpt: transformer blocks", EnvVars: env("LAYERS"), Category: catModel}
	headsFlag   = &cli.IntFlag{Name: "heads", Value: 6, Usage: "gpt: attention heads (dividing --dim)", EnvVars: env("HEADS"), Category: catModel}
	dimFlag     = &cli.IntFlag{Name: "dim", Value: 384, Usage: "gpt: width of the residual stream", EnvVars: env("DIM"), Category: catModel}
	contextFlag = &cli.IntFlag{Name: "context", Value: 256, Usage: "gpt: tokens per sample (positions)", EnvVars: env("CONTEXT"), Category: catModel}
	vocabFlag   = &cli.IntFlag{Name: "vocab", Value: 0, Usage: "gpt: the vocabulary's size (0: the shards' tokenizer.json, GPT-2's 50257 without one)", EnvVars: env("VOCAB"), Category: catModel}
	convFlag    = &cli.StringFlag{Name: "conv", Value: "winograd", Usage: "CPU: how 3x3 stride-1 convolutions of 4x4 and larger run: winograd (F(4x4,3x3): 4 times fewer multiplications, rounding about 1e-5 of the largest output against im2col's 1e-6) or im2col (one SGEMM); the others stay im2col", EnvVars: env("CONV"), Category: catModel}
	initFrom    = &cli.StringFlag{Name: "init-from", Usage: "start from the weights of this safetensors file (PyTorch state_dict names: a train checkpoint, or GPT-2's published weights), not from --seed; --resume's checkpoint comes first", EnvVars: env("INIT_FROM"), Category: catModel}
	dataFlag    = &cli.StringFlag{Name: "data", Value: "/usr/share/datasets/fashion-mnist", Usage: "dataset: a directory of MNIST-format IDX files (raw or .gz) or of CIFAR-10 binary batches, an image folder (train/ and val/, one sub-folder per class, JPEG and PNG), tar shards in WebDataset's layout ('train-{000000..000511}.tar', or a directory of train-NNNNNN.tar and val-NNNNNN.tar that train data pack wrote), or \"synthetic\"", EnvVars: env("DATA"), Category: catModel}
	synShape    = &cli.StringFlag{Name: "synthetic-shape", Value: "3x32x32", Usage: "--data synthetic: image shape CxHxW", EnvVars: env("SYNTHETIC_SHAPE"), Category: catModel}
	synSamples  = &cli.IntFlag{Name: "synthetic-samples", Value: 50000, Usage: "--data synthetic: training samples (the test set is a tenth)", EnvVars: env("SYNTHETIC_SAMPLES"), Category: catModel}
	augFlag     = &cli.StringFlag{Name: "augment", Value: "auto", Usage: "training augmentation: crop and/or flip (comma-separated), none, or auto (crop,flip for cnn and resnet, none for mlp)", EnvVars: env("AUGMENT"), Category: catModel}
	valDataFlag = &cli.StringFlag{Name: "val-data", Usage: "image folders and tar shards: the validation folder (one sub-folder per class) or shards, when --data is the training folder or shards themselves rather than a directory with both", EnvVars: env("VAL_DATA"), Category: catModel}
	imgSizeFlag = &cli.IntFlag{Name: "image-size", Value: 224, Usage: "image folders: the side of the training view (RandomResizedCrop) and the evaluation view (CenterCrop)", EnvVars: env("IMAGE_SIZE"), Category: catModel}
	resizeFlag  = &cli.IntFlag{Name: "resize", Usage: "image folders: the evaluation view's shorter side before its centre crop (default --image-size x 256/224: 256)", EnvVars: env("RESIZE"), Category: catModel}
	workersFlag = &cli.IntFlag{Name: "data-workers", Usage: "image folders: goroutines decoding each batch (default: the rank's threads)", EnvVars: env("DATA_WORKERS"), Category: catModel}
	meanFlag    = &cli.StringFlag{Name: "mean", Value: "0.485,0.456,0.406", Usage: "image folders: the per-channel mean (R,G,B, of values in 0..1) Normalize subtracts (default ImageNet's)", EnvVars: env("MEAN"), Category: catModel}
	stdFlag     = &cli.StringFlag{Name: "std", Value: "0.229,0.224,0.225", Usage: "image folders: the per-channel standard deviation Normalize divides by (default ImageNet's)", EnvVars: env("STD"), Category: catModel}
	skipBadFlag = &cli.BoolFlag{Name: "skip-bad", Usage: "image folders: an image that does not decode is skipped with a warning (the next one in the folder's order takes its place), not an error", EnvVars: env("SKIP_BAD"), Category: catModel}
	shuffleFlag = &cli.BoolFlag{Name: "shuffle", Value: true, Usage: "draw a new sample order each epoch; --shuffle=false reads the data in its order every epoch (tar shards: the pattern's, then each shard's)", EnvVars: env("SHUFFLE"), Category: catModel}
	bufferFlag  = &cli.IntFlag{Name: "shuffle-buffer", Value: 1000, Usage: "tar shards: samples each rank holds to shuffle in (WebDataset's shuffle buffer; memory: this many encoded images)", EnvVars: env("SHUFFLE_BUFFER"), Category: catModel}
	cropPadFlag = &cli.IntFlag{Name: "crop-pad", Value: 4, Usage: "random crop: pad each side by this many pixels first", EnvVars: env("CROP_PAD"), Category: catModel}

	microFlag  = &cli.IntFlag{Name: "micro-batches", Value: 1, Usage: "split each rank's batch into this many equal micro-batches, run one after another with their gradients summed (GPipe's micro-batches; BatchNorm statistics per micro-batch)", EnvVars: env("MICRO_BATCHES"), Category: catOptim}
	accumFlag  = &cli.StringFlag{Name: "accum-steps", Value: "1", Usage: "micro-steps per optimizer step, gradients summed with no communication until the last: the result of one step with this many times the batch; auto (with --global-batch): the fewest whose micro-batch fits in --batch-size", EnvVars: env("ACCUM_STEPS"), Category: catOptim}
	globalFlag = &cli.IntFlag{Name: "global-batch", Value: 0, Usage: "samples per optimizer step over all data-parallel replicas, the same at any number of ranks (per-rank batch and --accum-steps follow; --batch-size is then the largest micro-batch; --lr is this batch's rate)", EnvVars: env("GLOBAL_BATCH"), Category: catOptim}
	batchFlag  = &cli.IntFlag{Name: "batch-size", Value: 64, Usage: "samples per step per rank; the global batch is this x the number of ranks", EnvVars: env("BATCH_SIZE"), Category: catOptim}
	evalBatch  = &cli.IntFlag{Name: "eval-batch", Value: 0, Usage: "samples per evaluation pass per rank (0: --batch-size)", EnvVars: env("EVAL_BATCH"), Category: catOptim}
	epochsFlag = &cli.IntFlag{Name: "epochs", Value: 5, Usage: "passes over the training set; also the length the schedule plans for", EnvVars: env("EPOCHS"), Category: catOptim}
	stepsFlag  = &cli.IntFlag{Name: "max-steps", Value: 0, Usage: "stop after this many steps in all (0: no limit)", EnvVars: env("MAX_STEPS"), Category: catOptim}
	optFlag    = &cli.StringFlag{Name: "optimizer", Value: "sgd", Usage: "sgd, adam or adamw", EnvVars: env("OPTIMIZER"), Category: catOptim}
	lrFlag     = &cli.Float64Flag{Name: "lr", Value: sgdLR, DefaultText: "0.05 for sgd, 0.001 for adam and adamw", Usage: "learning rate, for the global batch as it is; with --lr-scaling linear, for one rank's batch (multiplied by the data-parallel ranks)", EnvVars: env("LR"), Category: catOptim}
	scaleFlag  = &cli.StringFlag{Name: "lr-scaling", Value: "none", Usage: "none, or linear: lr x number of ranks (Goyal et al. 2017)", EnvVars: env("LR_SCALING"), Category: catOptim}
	schedFlag  = &cli.StringFlag{Name: "lr-schedule", Value: "cosine", Usage: "constant, step, or cosine (to zero at the end of --epochs)", EnvVars: env("LR_SCHEDULE"), Category: catOptim}
	warmFlag   = &cli.IntFlag{Name: "warmup-steps", Value: 0, Usage: "linear learning-rate warm-up over the first N steps", EnvVars: env("WARMUP_STEPS"), Category: catOptim}
	stepEpochs = &cli.IntFlag{Name: "lr-step-epochs", Value: 30, Usage: "--lr-schedule step: epochs between decays", EnvVars: env("LR_STEP_EPOCHS"), Category: catOptim}
	decaySteps = &cli.IntFlag{Name: "lr-decay-steps", Value: 0, Usage: "--lr-schedule cosine: reach zero after this many steps (with the warm-up), nanoGPT's lr_decay_iters (0: at the end of --epochs)", EnvVars: env("LR_DECAY_STEPS"), Category: catOptim}
	gammaFlag  = &cli.Float64Flag{Name: "lr-gamma", Value: 0.1, Usage: "--lr-schedule step: factor of each decay", EnvVars: env("LR_GAMMA"), Category: catOptim}
	momFlag    = &cli.Float64Flag{Name: "momentum", Value: 0.9, Usage: "SGD momentum", EnvVars: env("MOMENTUM"), Category: catOptim}
	nestFlag   = &cli.BoolFlag{Name: "nesterov", Usage: "SGD with Nesterov momentum", EnvVars: env("NESTEROV"), Category: catOptim}
	wdFlag     = &cli.Float64Flag{Name: "weight-decay", Value: 0, Usage: "weight decay (L2 for sgd and adam, decoupled for adamw)", EnvVars: env("WEIGHT_DECAY"), Category: catOptim}
	decayAll   = &cli.BoolFlag{Name: "decay-all", Usage: "gpt: weight decay on every parameter, not only the matrices and embeddings (GPT-2's convention leaves biases and LayerNorms alone)", EnvVars: env("DECAY_ALL"), Category: catOptim}
	beta1Flag  = &cli.Float64Flag{Name: "beta1", Value: 0.9, Usage: "Adam beta1", EnvVars: env("BETA1"), Category: catOptim}
	beta2Flag  = &cli.Float64Flag{Name: "beta2", Value: 0.999, Usage: "Adam beta2", EnvVars: env("BETA2"), Category: catOptim}
	epsFlag    = &cli.Float64Flag{Name: "eps", Value: 1e-8, Usage: "Adam epsilon", EnvVars: env("EPS"), Category: catOptim}
	clipFlag   = &cli.Float64Flag{Name: "clip-grad-norm", Value: 0, Usage: "scale gradients to at most this L2 norm (0: off)", EnvVars: env("CLIP_GRAD_NORM"), Category: catOptim}
	seedFlag   = &cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the initial parameters, the data order and augmentation", EnvVars: env("SEED"), Category: catOptim}

	compressFlag = &cli.StringFlag{Name: "compress", Value: "none", Usage: "gradients on the wire as fp16 or bf16, reduced in float32 (ring, hier; Horovod's Compression.fp16), or none", EnvVars: env("COMPRESS"), Category: catDist}
	arFlag       = &cli.StringFlag{Name: "allreduce", Value: "ring", Usage: "gradient allreduce (allreduce, local-sgd): ring (ours, reduce-scatter + all-gather; all ranks on one host: through one shared-memory segment, the same bits; on GPUs over CUDA IPC or pinned host buffers), mpi (MPI_Allreduce), hier (within each host through shared memory, ring among hosts) or nccl (--device cuda)", EnvVars: env("ALLREDUCE"), Category: catDist}
	bucketFlag   = &cli.StringFlag{Name: "bucket-mb", Value: "25", Usage: "gradient bucket size in MiB, whole tensors in backward order (0: one bucket), or auto: try 1/4 to 64 MiB in the first steps and keep the fastest", EnvVars: env("BUCKET_MB"), Category: catDist}
	deviceFlag   = &cli.StringFlag{Name: "device", Value: "cpu", Usage: "where to train: cpu, or cuda (the GPU of local rank % GPUs; CUDA is opened at run time)", EnvVars: env("DEVICE"), Category: catDist}
	precFlag     = &cli.StringFlag{Name: "precision", Value: "fp32", Usage: "cuda: fp32, tf32 (tensor cores, 10-bit mantissas) or bf16 (tensor cores on bfloat16 inputs; fp32 master weights)", EnvVars: env("PRECISION"), Category: catDist}
	strategyFlag = &cli.StringFlag{Name: "strategy", Value: "allreduce", Usage: "how replicas stay in step: allreduce (gradients every step), ps-sync or ps-async (parameter servers, --servers, --staleness) or local-sgd (local steps, parameters and optimizer state averaged every --sync-every steps)", EnvVars: env("STRATEGY"), Category: catDist}
	serversFlag  = &cli.IntFlag{Name: "servers", Value: 1, Usage: "ps-sync, ps-async: parameter servers, the last ranks (the rest are workers)", EnvVars: env("SERVERS"), Category: catDist}
	colocateFlag = &cli.BoolFlag{Name: "colocate", Usage: "ps-sync, ps-async: run the --servers servers beside workers, in ranks 0..K-1 (SINGA's server_worker_separate: false), instead of on ranks of their own", EnvVars: env("COLOCATE"), Category: catDist}
	staleFlag    = &cli.IntFlag{Name: "staleness", Value: 4, Usage: "ps-async: updates a worker may run ahead of the slowest (0: synchronous rounds, -1: no bound)", EnvVars: env("STALENESS"), Category: catDist}
	syncEvery    = &cli.IntFlag{Name: "sync-every", Value: 8, Usage: "local-sgd: average the replicas every N steps (1: every step)", EnvVars: env("SYNC_EVERY"), Category: catDist}
	overlapFlag  = &cli.BoolFlag{Name: "overlap", Value: true, Usage: "allreduce each bucket while backward computes the layers below it (--overlap=false: after backward)", EnvVars: env("OVERLAP"), Category: catDist}
	bnFlag       = &cli.StringFlag{Name: "bn", Value: "auto", Usage: "BatchNorm statistics: sync (over the global batch, all ranks), local (per rank, averaged wherever the replicas are: evaluations, checkpoints, local SGD's averages) or auto (sync for allreduce and ps-sync, local for local-sgd and ps-async, whose replicas step apart)", EnvVars: env("BN"), Category: catDist}
	threadsFlag  = &cli.IntFlag{Name: "threads", Value: 0, Usage: "compute threads per rank, one pool shared by the layers and the matrix products (0: the cores this rank is bound to, or the node's cores / ranks on the node)", EnvVars: env("THREADS"), Category: catDist}
	gemmFlag     = &cli.StringFlag{Name: "gemm", Value: "blas", Usage: "cpu: the matrix products' kernels: blas (OpenBLAS's float32 SGEMM), amx (Intel AMX, Xeon from Sapphire Rapids on: each float split into three bf16 and summed from six tile products in float, float32's accuracy; refused where the CPU or Linux has no AMX) or avx512 (our own float32 SGEMM on the AVX-512 FMA units; refused where the CPU has no AVX-512)", EnvVars: env("GEMM"), Category: catDist}
	openblasFlag = &cli.StringFlag{Name: "openblas", Usage: "another OpenBLAS build to load, a path or a soname, refused if it does not load; none: the plain C loops (default: Debian's libopenblas.so.0, and the plain loops, as the log says, if that does not load)", EnvVars: env("OPENBLAS"), Category: catDist}

	gpuDetFlag  = &cli.BoolFlag{Name: "gpu-deterministic", Usage: "cuda: cuDNN's first deterministic algorithm by its heuristics instead of the fastest it measures, so runs repeat bit for bit", EnvVars: env("GPU_DETERMINISTIC"), Category: catGPU}
	gpuProfFlag = &cli.BoolFlag{Name: "gpu-profile", Usage: "cuda: time each layer kind, a synchronisation around every layer (train bench step prints it)", EnvVars: env("GPU_PROFILE"), Category: catGPU}
	gpuRingFlag = &cli.StringFlag{Name: "gpu-ring", Value: "auto", Usage: "cuda, --allreduce ring: the ring's transport, auto (CUDA IPC when every rank is on one node), ipc, or host (pinned host buffers and MPI)", EnvVars: env("GPU_RING"), Category: catGPU}
	libFlags    = []*cli.StringFlag{
		{Name: "libcuda", Usage: "cuda: the CUDA driver library to open (default libcuda.so.1)", EnvVars: env("LIBCUDA"), Category: catGPU},
		{Name: "libnvrtc", Usage: "cuda: NVRTC (default libnvrtc.so.13, then .12)", EnvVars: env("LIBNVRTC"), Category: catGPU},
		{Name: "libcublas", Usage: "cuda: cuBLAS (default libcublas.so.13, then .12)", EnvVars: env("LIBCUBLAS"), Category: catGPU},
		{Name: "libcudnn", Usage: "cuda: cuDNN (default libcudnn.so.9, then .8)", EnvVars: env("LIBCUDNN"), Category: catGPU},
		{Name: "libnccl", Usage: "cuda, --allreduce nccl: NCCL (default libnccl.so.2)", EnvVars: env("LIBNCCL"), Category: catGPU},
	}

	metricsFlag  = &cli.StringFlag{Name: "metrics-addr", Value: ":9400", Usage: "serve Prometheus /metrics on HOST:PORT, each rank on PORT + its local rank (\"\": off)", EnvVars: env("METRICS_ADDR"), Category: catCkpt}
	pushFlag     = &cli.StringFlag{Name: "pushgateway", Usage: "Prometheus Pushgateway URL: rank 0 pushes its metrics at the end (job train, or train_slurm_<id> in Slurm)", EnvVars: env("PUSHGATEWAY"), Category: catCkpt}
	pushEvery    = &cli.IntFlag{Name: "pushgateway-every", Value: 0, Usage: "also push to the Pushgateway every N steps (0: only at the end)", EnvVars: env("PUSHGATEWAY_EVERY"), Category: catCkpt}
	psPushFlag   = &cli.IntFlag{Name: "push-every", Value: 1, Usage: "ps-async: push the summed gradients every N steps (Downpour's n_push)", EnvVars: env("PUSH_EVERY"), Category: catDist}
	psFetchFlag  = &cli.IntFlag{Name: "fetch-every", Value: 1, Usage: "ps-async: fetch the parameters every N steps (Downpour's n_fetch)", EnvVars: env("FETCH_EVERY"), Category: catDist}
	timelineFlag = &cli.StringFlag{Name: "timeline", Usage: "write a Chrome trace (Perfetto, chrome://tracing) per rank: FILE.rankN.json", EnvVars: env("TIMELINE"), Category: catCkpt}
	evalEvery    = &cli.IntFlag{Name: "eval-every", Value: 0, Usage: "also evaluate the test (validation) split every N steps, not only at the end of each epoch (0: off)", EnvVars: env("EVAL_EVERY"), Category: catCkpt}
	logFileFlag  = &cli.StringFlag{Name: "log-file", Usage: "rank 0 writes one JSON record per log line and evaluation (train plot reads it)", EnvVars: env("LOG_FILE"), Category: catCkpt}
	progressFlag = &cli.StringFlag{Name: "progress", Value: "auto", Usage: "rank 0's live progress bar: auto (a terminal, not under mpirun or srun, which give ranks a terminal even when logging to a file), always, never", EnvVars: env("PROGRESS"), Category: catCkpt}
	plotFlag     = &cli.StringFlag{Name: "plot", Usage: "write the run's curves to this PNG at the end", EnvVars: env("PLOT"), Category: catCkpt}

	pipeFlag     = &cli.IntFlag{Name: "pipeline", Value: 1, Usage: "cut the model into this many pipeline stages, one per rank; np = data-parallel replicas x pipeline x tensor-parallel", EnvVars: env("PIPELINE"), Category: catDist}
	zeroFlag     = &cli.IntFlag{Name: "zero", Value: 0, Usage: "ZeRO stage among the data-parallel replicas (--strategy allreduce): 1 shards the optimizer's state, 2 the gradients too, 3 the parameters too (gathered layer by layer, FSDP); 0: full replicas", EnvVars: env("ZERO"), Category: catDist}
	tpFlag       = &cli.IntFlag{Name: "tensor-parallel", Value: 1, Usage: "gpt: split each transformer block's heads and MLP across this many neighbouring ranks (Megatron-LM)", EnvVars: env("TENSOR_PARALLEL"), Category: catDist}
	pipeSchedule = &cli.StringFlag{Name: "schedule", Value: "1f1b", Usage: "--pipeline: 1f1b (PipeDream-flush: at most P micro-batches' activations held) or gpipe (all forwards, then all backwards)", EnvVars: env("SCHEDULE"), Category: catDist}
	stagesFlag   = &cli.IntSliceFlag{Name: "stages", Usage: "--pipeline: layers in each stage, comma-separated (default: balanced by estimated compute; the log lists the layers)", EnvVars: env("STAGES"), Category: catDist}
	stallWarn    = &cli.DurationFlag{Name: "stall-warn", Value: 60 * time.Second, Usage: "rank 0 reports ranks missing from a collective others have waited in this long (0: no watchdog)", EnvVars: env("STALL_WARN"), Category: catDist}
	flightEvents = &cli.IntFlag{Name: "flight-events", Value: 4096, Usage: "the flight recorder keeps each rank's last N communication calls, dumped on a stall, SIGUSR2, an abort or a NaN stop for train doctor (0: off)", EnvVars: env("FLIGHT_EVENTS"), Category: catDist}
	sampleLog    = &cli.StringFlag{Name: "sample-log", Usage: "image folders and tar shards: each rank writes the key of every sample it trains on to DIR/samples-rankNNNNN.txt (epoch, step, key; a sample --skip-bad replaced as its stand-in)", EnvVars: env("SAMPLE_LOG"), Category: catDist}
	flightDir    = &cli.StringFlag{Name: "flight-dir", Usage: "where the flight recorder's dumps go, one JSON file per rank (default: flight/ in --checkpoint-dir, or ./flight)", EnvVars: env("FLIGHT_DIR"), Category: catDist}
	stallTimeout = &cli.DurationFlag{Name: "stall-timeout", Value: 30 * time.Minute, Usage: "abort the job when a collective has waited this long (0: never)", EnvVars: env("STALL_TIMEOUT"), Category: catDist}

	ckDirFlag  = &cli.StringFlag{Name: "checkpoint-dir", Usage: "directory for rank 0's checkpoints (safetensors); also written at the end", EnvVars: env("CHECKPOINT_DIR"), Category: catCkpt}
	ckEvery    = &cli.IntFlag{Name: "checkpoint-every", Value: 0, Usage: "write a checkpoint every N steps (0: only at the end)", EnvVars: env("CHECKPOINT_EVERY"), Category: catCkpt}
	ckFormat   = &cli.StringFlag{Name: "checkpoint-format", Value: "single", Usage: "single: one safetensors file gathered to rank 0 (PyTorch loads it); sharded: a directory where each pipeline stage and tensor shard writes its own file and rank 0 an index, with no gathering (models too big for one rank); --resume reads either onto any grid", EnvVars: env("CHECKPOINT_FORMAT"), Category: catCkpt}
	keepFlag   = &cli.IntFlag{Name: "keep", Value: 3, Usage: "keep the newest N checkpoints (0: all)", EnvVars: env("KEEP"), Category: catCkpt}
	resumeFlag = &cli.BoolFlag{Name: "resume", Usage: "continue from the newest checkpoint in --checkpoint-dir (from scratch if there is none)", EnvVars: env("RESUME"), Category: catCkpt}
	logFlag    = &cli.IntFlag{Name: "log-every", Value: 100, Usage: "rank 0 logs a line every N steps", EnvVars: env("LOG_EVERY"), Category: catCkpt}
)

var trainFlags = append([]cli.Flag{
	modelFlag, hiddenFlag, depthFlag, layersFlag, headsFlag, dimFlag, contextFlag, vocabFlag, convFlag, initFrom, dataFlag, synShape, synSamples, augFlag, cropPadFlag, valDataFlag, imgSizeFlag, resizeFlag, workersFlag, skipBadFlag, meanFlag, stdFlag, shuffleFlag, bufferFlag,
	batchFlag, microFlag, accumFlag, globalFlag, evalBatch, epochsFlag, stepsFlag, optFlag, lrFlag, scaleFlag, schedFlag, warmFlag, decaySteps, stepEpochs, gammaFlag,
	momFlag, nestFlag, wdFlag, decayAll, beta1Flag, beta2Flag, epsFlag, clipFlag, seedFlag,
	deviceFlag, precFlag, strategyFlag, syncEvery, serversFlag, colocateFlag, staleFlag, psPushFlag, psFetchFlag, arFlag, compressFlag, bucketFlag, overlapFlag, bnFlag, threadsFlag, gemmFlag, openblasFlag, stallWarn, stallTimeout, flightEvents, flightDir, sampleLog,
	pipeFlag, tpFlag, pipeSchedule, stagesFlag, zeroFlag,
	ckDirFlag, ckEvery, ckFormat, keepFlag, resumeFlag, logFlag,
	metricsFlag, pushFlag, pushEvery, timelineFlag, evalEvery, logFileFlag, plotFlag, progressFlag,
	gpuDetFlag, gpuProfFlag, gpuRingFlag,
}, libs()...)

func libs() []cli.Flag {
	out := make([]cli.Flag, len(libFlags))
	for i, f := range libFlags {
		out[i] = f
	}
	return out
}

// hostOwn names the options that may differ between ranks (a host's own
// library paths and ports); every other one must be the same on every
// rank (trainer's sameOptions).
var hostOwn = map[string]bool{openblasFlag.Name: true, metricsFlag.Name: true}

func init() {
	for _, f := range libFlags {
		hostOwn[f.Name] = true
	}
}

// buildRevision is the commit train was built from ("+modified" for a
// tree with changes), or "unknown" outside version control.
func buildRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, modified := "unknown", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = "+modified"
		}
	}
	return rev + modified
}

// gpuLibraries reads the --lib* options.
func gpuLibraries(c *cli.Context) gpu.Libraries {
	l := func(i int) string { return c.String(libFlags[i].Name) }
	return gpu.Libraries{CUDA: l(0), NVRTC: l(1), CUBLAS: l(2), CUDNN: l(3), NCCL: l(4)}
}

// --lr's default follows --optimizer: SGD's 0.05 (the MLP's and the
// ResNets'), and Adam's and AdamW's 0.001, PyTorch's default for both.
// One default of 0.05 for all made AdamW diverge on the GPT (loss 10.9 to
// 35.7 in 6 steps), and a diverged run's steps slowed tenfold on an Intel
// core (the benchmark commands in the README ran that way).
const (
	sgdLR  = 0.05
	adamLR = 0.001
)

// trainConfig reads the training flags, parsing every choice into its
// type: a value that is not one of its choices is an error here, before
// MPI starts.
func trainConfig(c *cli.Context) (trainer.Config, error) {
	cfg := trainer.Config{
		Model: trainer.ModelOptions{Kind: c.String(modelFlag.Name), Hidden: c.IntSlice(hiddenFlag.Name), Depth: c.Int(depthFlag.Name),
			Layers: c.Int(layersFlag.Name), Heads: c.Int(headsFlag.Name), Dim: c.Int(dimFlag.Name), Context: c.Int(contextFlag.Name), Vocab: c.Int(vocabFlag.Name),
			InitFrom: c.String(initFrom.Name), Conv: c.String(convFlag.Name)},
		Data: trainer.DataOptions{Dir: c.String(dataFlag.Name), SyntheticShape: c.String(synShape.Name), SyntheticSamples: c.Int(synSamples.Name),
			CropPad: c.Int(cropPadFlag.Name), ValDir: c.String(valDataFlag.Name), ImageSize: c.Int(imgSizeFlag.Name), Resize: c.Int(resizeFlag.Name), Workers: c.Int(workersFlag.Name), SkipBad: c.Bool(skipBadFlag.Name), Ordered: !c.Bool(shuffleFlag.Name), ShuffleBuffer: c.Int(bufferFlag.Name), BatchSize: c.Int(batchFlag.Name), MicroBatches: c.Int(microFlag.Name), EvalBatch: c.Int(evalBatch.Name),
			GlobalBatch: c.Int(globalFlag.Name)},
		Optim: trainer.OptimOptions{Optimizer: c.String(optFlag.Name), LR: c.Float64(lrFlag.Name), Schedule: c.String(schedFlag.Name),
			WarmupSteps: c.Int(warmFlag.Name), DecaySteps: c.Int(decaySteps.Name), DecayAll: c.Bool(decayAll.Name), StepEpochs: c.Int(stepEpochs.Name), Gamma: c.Float64(gammaFlag.Name),
			Momentum: c.Float64(momFlag.Name), Nesterov: c.Bool(nestFlag.Name), WeightDecay: c.Float64(wdFlag.Name),
			Beta1: c.Float64(beta1Flag.Name), Beta2: c.Float64(beta2Flag.Name), Eps: c.Float64(epsFlag.Name),
			ClipGradNorm: c.Float64(clipFlag.Name), Epochs: c.Int(epochsFlag.Name), MaxSteps: c.Int(stepsFlag.Name), Seed: c.Uint64(seedFlag.Name)},
		Dist: trainer.DistOptions{SyncEvery: c.Int(syncEvery.Name), Servers: c.Int(serversFlag.Name), Colocate: c.Bool(colocateFlag.Name),
			Staleness: c.Int(staleFlag.Name), PushEvery: c.Int(psPushFlag.Name), FetchEvery: c.Int(psFetchFlag.Name), Overlap: c.Bool(overlapFlag.Name),
			StallWarn: c.Duration(stallWarn.Name), StallTimeout: c.Duration(stallTimeout.Name),
			Pipeline: c.Int(pipeFlag.Name), TensorParallel: c.Int(tpFlag.Name), Stages: c.IntSlice(stagesFlag.Name), Zero: c.Int(zeroFlag.Name)},
		Device: trainer.DeviceOptions{Threads: c.Int(threadsFlag.Name), OpenBLAS: c.String(openblasFlag.Name), Gemm: c.String(gemmFlag.Name), GPURing: c.String(gpuRingFlag.Name),
			GPU: gpu.Options{Deterministic: c.Bool(gpuDetFlag.Name), Profile: c.Bool(gpuProfFlag.Name), Libraries: gpuLibraries(c)}},
		Observe: trainer.ObserveOptions{MetricsAddr: c.String(metricsFlag.Name), Pushgateway: c.String(pushFlag.Name), PushgatewayEvery: c.Int(pushEvery.Name),
			Timeline: c.String(timelineFlag.Name), LogFile: c.String(logFileFlag.Name), Plot: c.String(plotFlag.Name), LogEvery: c.Int(logFlag.Name), EvalEvery: c.Int(evalEvery.Name),
			FlightEvents: c.Int(flightEvents.Name), FlightDir: c.String(flightDir.Name), SampleLog: c.String(sampleLog.Name),
			Job: trainer.Job{SlurmJob: os.Getenv("SLURM_JOB_ID"), SlurmRestart: os.Getenv("SLURM_RESTART_COUNT"), Launcher: launcher()}},
		Checkpoint: trainer.CheckpointOptions{Dir: c.String(ckDirFlag.Name), Every: c.Int(ckEvery.Name), Keep: c.Int(keepFlag.Name), Resume: c.Bool(resumeFlag.Name)},
		Set:        map[string]bool{},
		Fault:      os.Getenv(trainer.FaultEnv), // tests only: not a flag
	}
	var errs []error
	parse(&errs, &cfg.Data.Augment, trainer.ParseAugment, c.String(augFlag.Name))
	parse(&errs, &cfg.Data.Mean, trainer.ParseChannels("--mean"), c.String(meanFlag.Name))
	parse(&errs, &cfg.Data.Std, trainer.ParseChannels("--std"), c.String(stdFlag.Name))
	parse(&errs, &cfg.Data.AccumSteps, trainer.ParseAccumSteps, c.String(accumFlag.Name))
	parse(&errs, &cfg.Optim.LinearScaling, trainer.ParseLRScaling, c.String(scaleFlag.Name))
	parse(&errs, &cfg.Dist.Strategy, trainer.ParseStrategy, c.String(strategyFlag.Name))
	parse(&errs, &cfg.Dist.Allreduce, trainer.ParseAlgorithm, c.String(arFlag.Name))
	parse(&errs, &cfg.Dist.Compress, mpi.ParseCompression, c.String(compressFlag.Name))
	parse(&errs, &cfg.Dist.Buckets, trainer.ParseBuckets, c.String(bucketFlag.Name))
	parse(&errs, &cfg.Dist.BN, trainer.ParseBN, c.String(bnFlag.Name))
	parse(&errs, &cfg.Dist.Schedule, trainer.ParseSchedule, c.String(pipeSchedule.Name))
	parse(&errs, &cfg.Checkpoint.Format, trainer.ParseCheckpointFormat, c.String(ckFormat.Name))
	parse(&errs, &cfg.Device.Device, trainer.ParseDevice, c.String(deviceFlag.Name))
	parse(&errs, &cfg.Device.Precision, trainer.ParsePrecision, c.String(precFlag.Name))
	parse(&errs, &cfg.Observe.Progress, trainer.ParseProgress, c.String(progressFlag.Name))
	for _, f := range trainFlags {
		n := f.Names()[0]
		if c.IsSet(n) { // on the command line or in its TRAIN_* variable
			cfg.Set[n] = true
		}
		if !hostOwn[n] {
			v := c.Value(n)
			if _, ok := f.(*cli.IntSliceFlag); ok {
				v = c.IntSlice(n)
			}
			cfg.Same = append(cfg.Same, fmt.Sprintf("--%s %v", n, v))
		}
	}
	cfg.Same = append(cfg.Same, "build "+buildRevision())
	if !cfg.Set[lrFlag.Name] && (cfg.Optim.Optimizer == "adam" || cfg.Optim.Optimizer == "adamw") {
		cfg.Optim.LR = adamLR
	}
	m := &cfg.Model
	m.Kind = gptPreset(m.Kind, func(f string) bool { return cfg.Set[f] }, &m.Layers, &m.Heads, &m.Dim, &m.Context)
	if len(errs) > 0 {
		return cfg, errs[0] // one line: the first bad choice
	}
	return cfg, nil
}

// gptPreset fills a GPT-2 size's layers, heads, dim and context where
// the command line did not set them (options given beside a preset win)
// and returns the model kind: gpt for a preset, kind otherwise.
func gptPreset(kind string, set func(flag string) bool, layers, heads, dim, context *int) string {
	p, ok := model.GPTPresets[kind]
	if !ok {
		return kind
	}
	for _, s := range []struct {
		flag string
		dst  *int
		v    int
	}{{"layers", layers, p.Layers}, {"heads", heads, p.Heads}, {"dim", dim, p.Dim}, {"context", context, p.Context}} {
		if !set(s.flag) {
			*s.dst = s.v
		}
	}
	return "gpt"
}

// parse reads a choice's flag value s into dst, collecting the error.
func parse[T any](errs *[]error, dst *T, read func(string) (T, error), s string) {
	v, err := read(s)
	if err != nil {
		*errs = append(*errs, err)
	}
	*dst = v
}

// launcher names the environment variable by which mpirun, a PMIx
// launcher or srun announced this process, "" if none did.
func launcher() string {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"} {
		if os.Getenv(v) != "" {
			return v
		}
	}
	return ""
}
