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

// BenchStep runs the step benchmark on every rank; rank 0 prints. The
// yardstick, SGEMM on 1024^3 with the same BLAS and threads, is measured
// on every rank at once, as the ranks share the machine during the steps.
func BenchStep(w *mpi.World, cfg Config, sb StepBench, out io.Writer) error {
	if w.Rank() != 0 {
		out = io.Discard
	}
	r := &run{w: w, cfg: cfg, rep: quiet(), errw: io.Discard, lastSaved: -1}
	if sb.Warmup < 0 || sb.Steps < 1 {
		return agree(w, fmt.Errorf("--warmup %d --steps %d: need warmup >= 0 and steps >= 1", sb.Warmup, sb.Steps))
	}
	if err := agree(w, r.cfg.Validate()); err != nil {
		return err
	}
	if err := agree(w, r.setup()); err != nil {
		return err
	}
	if r.cfg.BN == "sync" && w.Size() > 1 { // one rank: its own statistics are the global ones
		var err error
		if r.bn, err = w.Dup(); err != nil {
			return err
		}
		defer r.bn.Free()
		r.model.Mode.Reduce = r.reduceBN
	}
	r.model.Init(cfg.Seed)
	if err := r.broadcastState(); err != nil {
		return err
	}
	defer r.sync.close()
	if r.gpu != nil {
		if err := r.gpu.toDevice(); err != nil {
			return err
		}
	}

	if err := w.Barrier(); err != nil {
		return err
	}
	yard, short := "SGEMM 1024^3", "SGEMM"
	measure := func() float64 { return bench.SgemmGFLOPs(1024) }
	var gpuErr error // reported after the collectives below, which every rank must reach
	if r.gpu != nil {
		yard, short = fmt.Sprintf("GPU GEMM 4096^3 (%s)", cfg.Precision), "GPU GEMM"
		measure = func() float64 {
			f, err := r.gpu.ctx.GemmGFLOPs(4096, 20)
			gpuErr = err
			return f
		}
	}
	gemm := []float64{measure()}
	gemmMin := []float64{gemm[0]}
	if err := w.AllreduceFloat64(gemm, mpi.Sum); err != nil {
		return err
	}
	if err := w.AllreduceFloat64(gemmMin, mpi.Min); err != nil {
		return err
	}
	sgemm := gemm[0] / float64(w.Size())

	b := cfg.BatchSize
	x := make([]float32, b*r.train.SampleSize())
	y := make([]int32, b)
	idx := r.sampler.Epoch(0)
	spe := r.sampler.StepsPerEpoch()
	var st stepTimes
	var pre *prefetch
	if r.gpu != nil {
		pre = r.newPrefetch(b)
		defer pre.wait()
	}
	run := func(n int) error {
		for i := range n {
			k := (r.state.Step + i) % spe
			if r.gpu != nil { // as in training: the next batch is built while the GPU steps
				x, y = pre.get(0, k, idx)
				pre.start(0, (k+1)%spe, idx)
			} else {
				r.train.BatchAugmented(x, y, idx[k*b:(k+1)*b], r.augment, 0)
			}
			if _, _, err := r.step(x, y, r.sched.At(r.state.Step), &st); err != nil {
				return err
			}
		}
		r.state.Step += n
		return nil
	}
	if err := run(sb.Warmup); err != nil {
		return err
	}
	r.sync.takeWaiting()
	if r.gpu != nil && r.gpu.ctx.Profile != nil {
		clear(r.gpu.ctx.Profile) // the timed steps only
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	if err := run(sb.Steps); err != nil {
		return err
	}
	t := []float64{time.Since(start).Seconds(), r.sync.takeWaiting().Seconds(), float64(bench.PeakRSS()), 0}
	if r.gpu != nil {
		t[3] = float64(r.gpu.ctx.PeakBytes())
	}
	if err := w.AllreduceFloat64(t, mpi.Max); err != nil {
		return err
	}
	_, flops := r.model.FLOPs()
	perStep := t[0] / float64(sb.Steps)
	sps := float64(b*w.Size()) / perStep
	perRank := sps * float64(flops) / float64(w.Size()) / 1e9
	fmt.Fprintf(out, "# train bench step: %s, %d parameters, %.1f MFLOP (GEMM) per training sample, %dx%dx%d inputs (%s)\n",
		cfg.modelName(), r.model.Params.Len(), float64(flops)/1e6, r.train.C, r.train.H, r.train.W, r.train.Name)
	fmt.Fprintf(out, "# %d rank(s) x batch %d, %s, allreduce %s, batchnorm %s; %d warm-up + %d timed steps\n",
		w.Size(), b, r.blas, cfg.Allreduce, cfg.BN, sb.Warmup, sb.Steps)
	if r.gpu != nil {
		fmt.Fprintf(out, "# %s, precision %s\n", r.gpu.ctx.Dev, cfg.Precision)
	}
	fmt.Fprintf(out, "# %s on every rank at once: %.1f GFLOP/s per rank (slowest %.1f)\n", yard, sgemm, gemmMin[0])
	fmt.Fprintf(out, "samples/s %.1f\nms/step %.2f (slowest rank; %.2f of it waiting for gradients)\nGFLOP/s per rank %.1f\nfraction of %s %.2f\npeak RSS per rank %.0f MiB\n",
		sps, perStep*1e3, t[1]/float64(sb.Steps)*1e3, perRank, short, perRank/sgemm, t[2]/(1<<20))
	if r.gpu != nil {
		fmt.Fprintf(out, "peak device memory per rank %.0f MiB (train's allocations; cuDNN's and cuBLAS's own not counted)\n", t[3]/(1<<20))
	}
	if r.gpu != nil && r.gpu.ctx.Profile != nil {
		prof := r.gpu.ctx.Profile
		names := slices.SortedFunc(maps.Keys(prof), func(a, b string) int { return cmp.Compare(prof[b], prof[a]) })
		var total time.Duration
		for _, k := range names {
			total += prof[k]
		}
		fmt.Fprintf(out, "# TRAIN_GPU_PROFILE (rank 0; every layer fenced by synchronisation, so the step above is slower): %.2f ms per step in layers\n", total.Seconds()*1e3/float64(sb.Steps))
		for _, k := range names {
			fmt.Fprintf(out, "#   %-14s %7.3f ms/step\n", k, prof[k].Seconds()*1e3/float64(sb.Steps))
		}
	}
	return gpuErr
}
