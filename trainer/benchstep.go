package trainer

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"train/bench"
	"train/mpi"
)

// StepBench is `train bench step`: Warmup untimed and Steps timed
// training steps (the same step as training: data, forward, backward with
// the gradient allreduce, update) of the model cfg describes.
type StepBench struct {
	Warmup, Steps int
}

// yardstick is what train bench step asks of an executor beside the
// step: the matrix product it compares the step with, run on every rank
// at once (the ranks share the machine during the steps too), and the
// device's peak memory and per-layer profile where it has them.
type yardstick interface {
	yardstick() (name, short string, gflops func() (float64, error))
	peakBytes() int64
	profile() map[string]time.Duration
}

func (e *cpuExecutor) yardstick() (string, string, func() (float64, error)) {
	return "SGEMM 1024^3", "SGEMM", func() (float64, error) { return bench.SgemmGFLOPs(1024), nil }
}
func (e *cpuExecutor) peakBytes() int64                  { return 0 }
func (e *cpuExecutor) profile() map[string]time.Duration { return nil }

func (e *cudaExecutor) yardstick() (string, string, func() (float64, error)) {
	return fmt.Sprintf("GPU GEMM 4096^3 (%s)", e.prec), "GPU GEMM", func() (float64, error) { return e.ctx.GemmGFLOPs(4096, 20) }
}
func (e *cudaExecutor) peakBytes() int64                  { return e.ctx.PeakBytes() }
func (e *cudaExecutor) profile() map[string]time.Duration { return e.ctx.Profile }

// benchOptions is cfg for a benchmark: nothing watches, nothing is
// written, nothing is resumed.
func benchOptions(cfg Config) Config {
	cfg.Checkpoint = CheckpointOptions{}
	cfg.Observe = ObserveOptions{LogEvery: 1 << 30, Progress: ProgressNever, Job: cfg.Observe.Job}
	cfg.Dist.StallWarn, cfg.Dist.StallTimeout = 0, 0
	cfg.Fault = ""
	return cfg
}

// BenchStep runs the step benchmark on every rank; rank 0 prints.
func BenchStep(w *mpi.World, cfg Config, sb StepBench, out io.Writer) error {
	if w.Rank() != 0 {
		out = io.Discard
	}
	if sb.Warmup < 0 || sb.Steps < 1 {
		return agree(w, fmt.Errorf("--warmup %d --steps %d: need warmup >= 0 and steps >= 1", sb.Warmup, sb.Steps))
	}
	s, err := NewSession(w, benchOptions(cfg), Options{Err: io.Discard, Bench: true})
	if err != nil {
		return err
	}
	defer s.Close()
	cfg = s.Cfg
	if err := s.exec.ToDevice(); err != nil {
		return err
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	dev := s.exec.(yardstick)
	yard, short, measure := dev.yardstick()
	g, devErr := measure() // reported after the collectives below, which every rank must reach
	gemm, gemmMin := []float64{g}, []float64{g}
	if err := w.AllreduceFloat64(gemm, mpi.Sum); err != nil {
		return err
	}
	if err := w.AllreduceFloat64(gemmMin, mpi.Min); err != nil {
		return err
	}
	sgemm := gemm[0] / float64(w.Size())

	b := cfg.Data.BatchSize
	global := b * w.Size()
	order := s.Sampler.Epoch(0)
	spe := s.Sampler.StepsPerEpoch()
	batches := s.newBatches()
	defer batches.wait()
	run := func(n int) error {
		for range n {
			var t stepTimes
			t.start = time.Now()
			x, y := batches.get(0, s.State.Step%spe, order)
			t.data = time.Since(t.start)
			if _, _, err := s.step(x, y, s.Sched.At(s.State.Samples, int64(global)), &t); err != nil {
				return err
			}
			s.State.Step++
			s.State.Samples += int64(global)
		}
		return nil
	}
	if err := run(sb.Warmup); err != nil {
		return err
	}
	s.strategy.Waiting()
	prof := dev.profile()
	clear(prof) // the timed steps only
	if err := w.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	if err := run(sb.Steps); err != nil {
		return err
	}
	t := []float64{time.Since(start).Seconds(), s.strategy.Waiting().Seconds(), float64(bench.PeakRSS()), float64(dev.peakBytes())}
	if err := w.AllreduceFloat64(t, mpi.Max); err != nil {
		return err
	}
	_, flops := s.Model.FLOPs()
	perStep := t[0] / float64(sb.Steps)
	sps := float64(global) / perStep
	perRank := sps * float64(flops) / float64(w.Size()) / 1e9
	fmt.Fprintf(out, "# train bench step: %s, %d parameters, %.1f MFLOP (GEMM) per training sample, %dx%dx%d inputs (%s)\n",
		cfg.ModelName(), s.Model.Params.Len(), float64(flops)/1e6, s.Train.C, s.Train.H, s.Train.W, s.Train.Name)
	fmt.Fprintf(out, "# %d rank(s) x batch %d, %s, allreduce %s, batchnorm %s; %d warm-up + %d timed steps\n",
		w.Size(), b, s.exec.Describe(), cfg.Dist.Allreduce, cfg.Dist.BN, sb.Warmup, sb.Steps)
	fmt.Fprintf(out, "# %s on every rank at once: %.1f GFLOP/s per rank (slowest %.1f)\n", yard, sgemm, gemmMin[0])
	fmt.Fprintf(out, "samples/s %.1f\nms/step %.2f (slowest rank; %.2f of it waiting for gradients)\nGFLOP/s per rank %.1f\nfraction of %s %.2f\npeak RSS per rank %.0f MiB\n",
		sps, perStep*1e3, t[1]/float64(sb.Steps)*1e3, perRank, short, perRank/sgemm, t[2]/(1<<20))
	if t[3] > 0 {
		fmt.Fprintf(out, "peak device memory per rank %.0f MiB (train's allocations; cuDNN's and cuBLAS's own not counted)\n", t[3]/(1<<20))
	}
	if prof != nil {
		names := slices.SortedFunc(maps.Keys(prof), func(a, b string) int { return cmp.Compare(prof[b], prof[a]) })
		var total time.Duration
		for _, k := range names {
			total += prof[k]
		}
		fmt.Fprintf(out, "# --gpu-profile (rank 0; every layer fenced by synchronisation, so the step above is slower): %.2f ms per step in layers\n", total.Seconds()*1e3/float64(sb.Steps))
		for _, k := range names {
			fmt.Fprintf(out, "#   %-14s %7.3f ms/step\n", k, prof[k].Seconds()*1e3/float64(sb.Steps))
		}
	}
	return devErr
}
