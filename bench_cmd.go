package main

import (
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"

	"train/bench"
	"train/gpu"
	"train/mpi"
)

// benchStepFlags are the training flags with the benchmark's defaults:
// synthetic data of Fashion-MNIST's shape and a ResNet-20.
func benchStepFlags() []cli.Flag {
	flags := slices.Clone(trainFlags)
	for i, f := range flags {
		switch f {
		case dataFlag:
			d := *dataFlag
			d.Value = "synthetic"
			flags[i] = &d
		case synShape:
			d := *synShape
			d.Value = "1x28x28"
			flags[i] = &d
		case synSamples:
			d := *synSamples
			d.Value = 4096
			flags[i] = &d
		case modelFlag:
			d := *modelFlag
			d.Value = "resnet"
			flags[i] = &d
		}
	}
	return flags
}

// benchStrategyFlags are the training flags, with --servers 2: the K of
// the "ps-sync K servers" row.
func benchStrategyFlags() []cli.Flag {
	flags := slices.Clone(trainFlags)
	for i, f := range flags {
		if f == serversFlag {
			d := *serversFlag
			d.Value = 2
			d.Usage = "K of the row \"ps-sync K servers\" (the other parameter-server rows have one)"
			flags[i] = &d
		}
	}
	return flags
}

// benchIgnored are the training options bench step and bench strategies
// would take and not act on: what they turn off (bench.Quietened) and
// --max-steps (they run --warmup and --steps).
var benchIgnored = append(slices.Clone(bench.Quietened), stepsFlag.Name)

// `train bench ...`: measurements under mpirun, printed by rank 0.

var benchCommand = &cli.Command{
	Name:  "bench",
	Usage: "benchmarks, run under mpirun like training",
	Subcommands: []*cli.Command{{
		Name:  "step",
		Usage: "training-step throughput and achieved GFLOP/s against SGEMM, measured in the same run",
		UsageText: "mpirun -np N train bench step [--model resnet --depth 20] [--batch-size 64] [--steps 20]\n" +
			"Takes the training options but those that write, serve or resume (refused) and --max-steps; --data defaults to synthetic 1x28x28 (Fashion-MNIST's shape).",
		Flags: append(benchStepFlags(), &cli.IntFlag{Name: "steps", Value: 20, Usage: "timed steps"},
			&cli.IntFlag{Name: "warmup", Value: 3, Usage: "untimed steps first"},
			&cli.BoolFlag{Name: "passes", Usage: "print where rank 0's timed steps went, pass by pass of the thread pool, and each pass's tail spent waiting for the other threads"},
			&cli.IntFlag{Name: "simulate-threads", Usage: "with --threads 1: cut every pass as for N threads, run it on the one, and print the step and the passes as N threads would run them at best (no wake-ups, no shared memory)"}),
		Action: func(c *cli.Context) error {
			if err := refuseGiven(c, benchIgnored, "a benchmark writes, serves and resumes nothing and runs --warmup then --steps steps"); err != nil {
				return err
			}
			cfg, err := trainConfig(c)
			if err != nil {
				return err
			}
			return withWorld(c, func(w *mpi.World) error {
				return bench.Step(w, cfg, bench.StepBench{Warmup: c.Int("warmup"), Steps: c.Int("steps"), Passes: c.Bool("passes"), Simulate: c.Int("simulate-threads")}, c.App.Writer)
			})
		},
	}, {
		Name:  "strategies",
		Usage: "the same model and data under each strategy: throughput, communication wait, bytes per rank per step",
		UsageText: "mpirun -np N train bench strategies [--model mlp] [--steps 200] [--servers 2] [--staleness 4] [--sync-every 8] [--csv]\n" +
			"Rows: allreduce ring and mpi, ps-sync with 1 and --servers servers, ps-async with 1 server, local-sgd; takes the training options but those that write, serve or resume (refused), --max-steps and --strategy.",
		Flags: append(benchStrategyFlags(), &cli.IntFlag{Name: "steps", Value: 200, Usage: "timed steps per strategy"},
			&cli.IntFlag{Name: "warmup", Value: 20, Usage: "untimed steps first"},
			&cli.BoolFlag{Name: "csv", Usage: "machine-readable output"}),
		Action: func(c *cli.Context) error {
			if err := refuseGiven(c, append(slices.Clip(benchIgnored), strategyFlag.Name), "a benchmark writes, serves and resumes nothing, runs --warmup then --steps steps, and each row sets its own --strategy"); err != nil {
				return err
			}
			cfg, err := trainConfig(c)
			if err != nil {
				return err
			}
			sb := bench.StrategyBench{Warmup: c.Int("warmup"), Steps: c.Int("steps"), Servers: cfg.Dist.Servers, CSV: c.Bool("csv")}
			return withWorld(c, func(w *mpi.World) error {
				return bench.Strategies(w, cfg, sb, c.App.Writer, c.App.ErrWriter)
			})
		},
	}, {
		Name:  "allreduce",
		Usage: "allreduce bandwidth by size and algorithm, in the manner of nccl-tests' all_reduce_perf",
		UsageText: "mpirun -np N train bench allreduce [-b 8] [-e 256M] [-f 4] [--algo ring,mpi] [--csv]\n" +
			"busbw = algbw x 2(N-1)/N; wrong counts elements that differ from the exact sum.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "minbytes", Aliases: []string{"b"}, Value: "8", Usage: "smallest size (bytes; K, M, G suffixes)"},
			&cli.StringFlag{Name: "maxbytes", Aliases: []string{"e"}, Value: "256M", Usage: "largest size"},
			&cli.Int64Flag{Name: "stepfactor", Aliases: []string{"f"}, Value: 4, Usage: "multiply the size by this each row"},
			&cli.IntFlag{Name: "warmup_iters", Aliases: []string{"w"}, Value: 5, Usage: "untimed runs per size and algorithm"},
			&cli.IntFlag{Name: "iters", Aliases: []string{"n"}, Value: 20, Usage: "timed runs per size and algorithm"},
			&cli.StringFlag{Name: "algo", Value: "ring,mpi", Usage: "algorithms, comma-separated: ring, mpi, hier (hierarchical: per host, then among hosts), shm (ranks on one host, through one shared segment; the default adds it when all ranks share one)"},
			&cli.BoolFlag{Name: "csv", Usage: "machine-readable output"},
			&cli.IntFlag{Name: "segment-kb", Value: mpi.RingSegment * 4 >> 10, Usage: "ring: segment size in KiB"},
			&cli.IntFlag{Name: "slots", Value: mpi.RingSlots, Usage: "ring: scratch slots (segments in flight)"},
			&cli.StringFlag{Name: "compress", Value: "none", Usage: "ring and hier: none, fp16 or bf16 on the wire (sizes stay float32 bytes)"},
			&cli.StringFlag{Name: "device", Value: "cpu", Usage: "cpu, or cuda: device buffers, --algo from ring (CUDA IPC on one node), ring-host (pinned host buffers), nccl, mpi"},
		}, libs()...),
		Action: func(c *cli.Context) error {
			cfg := bench.AllreduceConfig{
				Factor: c.Int64("stepfactor"), Warmup: c.Int("warmup_iters"), Iters: c.Int("iters"),
				Algos: bench.ParseAlgos(c.String("algo")), CSV: c.Bool("csv"),
			}
			var err error
			if cfg.Compress, err = mpi.ParseCompression(c.String("compress")); err != nil {
				return err
			}
			dev := c.String("device")
			if dev != "cpu" && dev != "cuda" {
				return fmt.Errorf("--device %q: choose cpu or cuda", dev)
			}
			if dev == "cuda" && !c.IsSet("algo") {
				cfg.Algos = []string{"ring", "nccl", "mpi"}
			}
			if cfg.Min, err = bench.ParseSize(c.String("minbytes")); err != nil {
				return fmt.Errorf("-b: %v", err)
			}
			if cfg.Max, err = bench.ParseSize(c.String("maxbytes")); err != nil {
				return fmt.Errorf("-e: %v", err)
			}
			if dev == "cuda" {
				if cfg.Compress != mpi.None {
					return fmt.Errorf("--compress is for the CPU ring; --device cuda sends float32")
				}
				for _, f := range []string{"segment-kb", "slots"} {
					if c.IsSet(f) {
						return fmt.Errorf("--%s shapes the CPU ring's segments; --device cuda's ring is sized by itself (drop --%s)", f, f)
					}
				}
				algos := cfg.Algos
				cfg.Algos = nil
				if err := cfg.Validate(); err != nil {
					return err
				}
				cfg.Algos = algos
				return withWorld(c, func(w *mpi.World) error {
					return bench.AllreduceGPU(w, cfg, gpu.Precision("fp32"), gpu.Options{Libraries: gpuLibraries(c)}, c.App.Writer)
				})
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if kb, slots := c.Int("segment-kb"), c.Int("slots"); kb < 1 || slots < 1 || slots > 16 {
				return fmt.Errorf("--segment-kb %d --slots %d: need at least 1 KiB and 1 to 16 slots", kb, slots)
			}
			mpi.RingSegment, mpi.RingSlots = c.Int("segment-kb")<<10/4, c.Int("slots")
			return withWorld(c, func(w *mpi.World) error {
				if !c.IsSet("algo") && cfg.Compress == mpi.None && w.Size() > 1 && w.LocalSize() == w.Size() {
					cfg.Algos = append(cfg.Algos, "shm")
				}
				return bench.Allreduce(w, cfg, c.App.Writer)
			})
		},
	}},
}
