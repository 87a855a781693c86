package bench

import (
	"fmt"
	"io"

	"train/gpu"
	"train/mpi"
)

// GPUAlgos are the allreduces of `train bench allreduce --device cuda`:
// ring (ours; CUDA IPC when every rank is on one node, else pinned host
// buffers), ring-host (ours, forced through pinned host buffers), nccl,
// and mpi (device to host, MPI_Allreduce, host to device).
var GPUAlgos = []string{"ring", "ring-host", "nccl", "mpi"}

// AllreduceGPU is Allreduce on device buffers: the same sizes, check,
// timing and columns, and beside them the device-to-device copy bandwidth
// the ring's busbw is compared with.
func AllreduceGPU(w *mpi.World, c AllreduceConfig, prec gpu.Precision, opt gpu.Options, out io.Writer) error {
	if w.Rank() != 0 {
		out = io.Discard
	}
	ctx, err := gpu.Open(w.LocalRank(), prec, opt)
	if err != nil {
		return fmt.Errorf("--device cuda: rank %d: %v", w.Rank(), err)
	}
	n := w.Size()
	maxCount := int(c.Max / 4)
	buf, err := ctx.Alloc(maxCount)
	if err != nil {
		return fmt.Errorf("rank %d: %v", w.Rank(), err)
	}
	defer buf.Close()
	algos := map[string]func(*gpu.Buf) error{}
	host := make([]float32, maxCount)
	for _, a := range c.Algos {
		switch a {
		case "ring", "ring-host":
			mode := map[string]string{"ring": "auto", "ring-host": "host"}[a]
			r, err := gpu.NewRing(ctx, w, mode)
			if err != nil {
				return err
			}
			defer r.Close()
			algos[a] = func(b *gpu.Buf) error { return r.Allreduce(b, false) }
		case "nccl":
			x, err := gpu.NewNCCL(ctx, w)
			if err != nil {
				fmt.Fprintf(out, "# nccl: %v\n", err)
				continue
			}
			defer x.Close()
			algos[a] = func(b *gpu.Buf) error { return x.Allreduce(b, false) }
		case "mpi":
			algos[a] = func(b *gpu.Buf) error {
				h := host[:b.Len()]
				if err := b.Download(h); err != nil {
					return err
				}
				if err := w.AllreduceFloat32(h, mpi.Sum); err != nil {
					return err
				}
				return b.Upload(h)
			}
		default:
			return fmt.Errorf("--algo %q with --device cuda: choose from ring, ring-host, nccl and mpi", a)
		}
	}
	copyGBs, err := ctx.CopyGBs(int(min(c.Max, 256<<20)), 20)
	if err != nil {
		return err
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	fmt.Fprintf(out, "# train bench allreduce --device cuda: %d rank(s) on %s, float32 sum in place, %d warm-up + %d timed iterations\n",
		n, ctx.Dev.Name, c.Warmup, c.Iters)
	fmt.Fprintf(out, "# device-to-device copy, %s (rank 0): %.1f GB/s copied (reads + writes: %.1f GB/s)\n",
		FormatSize(min(c.Max, 256<<20)), copyGBs, 2*copyGBs)
	c.header(out)
	for size := c.Min; size <= c.Max; size *= c.Factor {
		count := int(size / 4)
		b := buf.Slice(0, count)
		for _, name := range c.Algos {
			f := algos[name]
			if f == nil {
				continue
			}
			wrong, err := checkGPU(w, b, host[:count], f)
			if err != nil {
				return err
			}
			b.Fill(1e-3)
			if err := c.row(w, out, int64(count), name, wrong, func() error { return f(b) }); err != nil {
				return err
			}
		}
		if c.Factor > 1 && size > c.Max/c.Factor {
			break
		}
	}
	peak := []float64{float64(ctx.PeakBytes()), float64(PeakRSS())}
	if err := w.AllreduceFloat64(peak, mpi.Max); err != nil {
		return err
	}
	fmt.Fprintf(out, "# peak device memory through train's allocations, largest rank: %.1f MiB (buffer %.1f MiB); peak resident host memory %.1f MiB\n",
		peak[0]/(1<<20), float64(c.Max)/(1<<20), peak[1]/(1<<20))
	return nil
}

// checkGPU is checkAllreduce on a device buffer: the host values go up,
// f runs on the device, the result comes back to be counted.
func checkGPU(w *mpi.World, b *gpu.Buf, h []float32, f func(*gpu.Buf) error) (int64, error) {
	return checkAllreduce(w, h, func(h []float32, _ mpi.Op) error {
		if err := b.Upload(h); err != nil {
			return err
		}
		if err := f(b); err != nil {
			return err
		}
		return b.Download(h)
	}, false)
}
