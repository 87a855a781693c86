package main

import (
	"os"

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
	modelFlag   = &cli.StringFlag{Name: "model", Value: "mlp", Usage: "network to train: mlp", EnvVars: env("MODEL"), Category: catModel}
	hiddenFlag  = &cli.IntSliceFlag{Name: "hidden", Value: cli.NewIntSlice(256), Usage: "MLP hidden layer sizes, comma-separated", EnvVars: env("HIDDEN"), Category: catModel}
	dataFlag    = &cli.StringFlag{Name: "data", Value: "/usr/share/datasets/fashion-mnist", Usage: "dataset directory (MNIST-format IDX files, raw or .gz)", EnvVars: env("DATA"), Category: catModel}
	batchFlag   = &cli.IntFlag{Name: "batch-size", Value: 64, Usage: "samples per step per rank; the global batch is this x the number of ranks", EnvVars: env("BATCH_SIZE"), Category: catOptim}
	epochsFlag  = &cli.IntFlag{Name: "epochs", Value: 5, Usage: "passes over the training set", EnvVars: env("EPOCHS"), Category: catOptim}
	stepsFlag   = &cli.IntFlag{Name: "max-steps", Value: 0, Usage: "stop after this many steps in all (0: no limit)", EnvVars: env("MAX_STEPS"), Category: catOptim}
	lrFlag      = &cli.Float64Flag{Name: "lr", Value: 0.05, Usage: "learning rate", EnvVars: env("LR"), Category: catOptim}
	schedFlag   = &cli.StringFlag{Name: "lr-schedule", Value: "cosine", Usage: "learning-rate schedule over the planned --epochs: constant or cosine (to zero)", EnvVars: env("LR_SCHEDULE"), Category: catOptim}
	warmFlag    = &cli.IntFlag{Name: "warmup-steps", Value: 0, Usage: "linear learning-rate warm-up over the first N steps", EnvVars: env("WARMUP_STEPS"), Category: catOptim}
	momFlag     = &cli.Float64Flag{Name: "momentum", Value: 0.9, Usage: "SGD momentum", EnvVars: env("MOMENTUM"), Category: catOptim}
	wdFlag      = &cli.Float64Flag{Name: "weight-decay", Value: 0, Usage: "L2 weight decay", EnvVars: env("WEIGHT_DECAY"), Category: catOptim}
	seedFlag    = &cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the initial parameters and of the data order", EnvVars: env("SEED"), Category: catOptim}
	arFlag      = &cli.StringFlag{Name: "allreduce", Value: "ring", Usage: "gradient allreduce: ring (ours, reduce-scatter + all-gather) or mpi (MPI_Allreduce)", EnvVars: env("ALLREDUCE"), Category: catDist}
	bucketFlag  = &cli.Float64Flag{Name: "bucket-mb", Value: 25, Usage: "gradient bucket size in MiB, whole tensors in backward order (0: one bucket)", EnvVars: env("BUCKET_MB"), Category: catDist}
	overlapFlag = &cli.BoolFlag{Name: "overlap", Value: true, Usage: "allreduce each bucket while backward computes the layers below it (--overlap=false: after backward)", EnvVars: env("OVERLAP"), Category: catDist}
	ckDirFlag   = &cli.StringFlag{Name: "checkpoint-dir", Usage: "directory for rank 0's checkpoints (safetensors); also written at the end", EnvVars: env("CHECKPOINT_DIR"), Category: catCkpt}
	ckEvery     = &cli.IntFlag{Name: "checkpoint-every", Value: 0, Usage: "write a checkpoint every N steps (0: only at the end)", EnvVars: env("CHECKPOINT_EVERY"), Category: catCkpt}
	keepFlag    = &cli.IntFlag{Name: "keep", Value: 3, Usage: "keep the newest N checkpoints (0: all)", EnvVars: env("KEEP"), Category: catCkpt}
	resumeFlag  = &cli.BoolFlag{Name: "resume", Usage: "continue from the newest checkpoint in --checkpoint-dir (from scratch if there is none)", EnvVars: env("RESUME"), Category: catCkpt}
	logFlag     = &cli.IntFlag{Name: "log-every", Value: 100, Usage: "rank 0 logs a line every N steps", EnvVars: env("LOG_EVERY"), Category: catCkpt}
)

var trainFlags = []cli.Flag{
	modelFlag, hiddenFlag, dataFlag,
	batchFlag, epochsFlag, stepsFlag, lrFlag, schedFlag, warmFlag, momFlag, wdFlag, seedFlag,
	arFlag, bucketFlag, overlapFlag,
	ckDirFlag, ckEvery, keepFlag, resumeFlag, logFlag,
}

// trainConfig reads the training flags.
func trainConfig(c *cli.Context) trainer.Config {
	return trainer.Config{
		Model:           c.String(modelFlag.Name),
		Hidden:          c.IntSlice(hiddenFlag.Name),
		DataDir:         c.String(dataFlag.Name),
		BatchSize:       c.Int(batchFlag.Name),
		Epochs:          c.Int(epochsFlag.Name),
		MaxSteps:        c.Int(stepsFlag.Name),
		LR:              c.Float64(lrFlag.Name),
		LRSchedule:      c.String(schedFlag.Name),
		WarmupSteps:     c.Int(warmFlag.Name),
		Momentum:        c.Float64(momFlag.Name),
		WeightDecay:     c.Float64(wdFlag.Name),
		Seed:            c.Uint64(seedFlag.Name),
		Allreduce:       c.String(arFlag.Name),
		BucketMB:        c.Float64(bucketFlag.Name),
		Overlap:         c.Bool(overlapFlag.Name),
		CheckpointDir:   c.String(ckDirFlag.Name),
		CheckpointEvery: c.Int(ckEvery.Name),
		Keep:            c.Int(keepFlag.Name),
		Resume:          c.Bool(resumeFlag.Name),
		LogEvery:        c.Int(logFlag.Name),
		Fault:           os.Getenv(trainer.FaultEnv), // tests only: not a flag
	}
}
