package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"train/mpi"
)

// AllreduceConfig is `train bench allreduce`, after nccl-tests'
// all_reduce_perf: float32 sums, in place, for sizes Min, Min*Factor, ...
// up to Max bytes.
type AllreduceConfig struct {
	Min, Max int64 // bytes
	Factor   int64
	Warmup   int
	Iters    int
	Algos    []string // "ring", "mpi", "hier", "shm"
	CSV      bool
	Compress mpi.Compression // ring and hier send 16-bit floats (their rows say ring:fp16, hier:bf16)
}

// Allreducers maps algorithm names to the World's in-place allreduces;
// hier is non-nil when the caller made the hierarchical one's
// communicators (NewHier), shm when it mapped the shared segment (NewShm).
func Allreducers(w *mpi.World, hier *mpi.Hier, shm *mpi.Shm, comp mpi.Compression) map[string]func([]float32, mpi.Op) error {
	m := map[string]func([]float32, mpi.Op) error{
		"ring": func(b []float32, op mpi.Op) error { return w.RingAllreduceCompressed(b, op, comp) },
		"mpi":  w.AllreduceFloat32,
	}
	if hier != nil {
		hier.Compress = comp
		m["hier"] = hier.AllreduceFloat32
	}
	if shm != nil {
		m["shm"] = shm.AllreduceFloat32
	}
	return m
}

// Validate checks the sizes, counts and algorithm names.
func (c *AllreduceConfig) Validate() error {
	switch {
	case c.Min < 4 || c.Max < c.Min:
		return fmt.Errorf("-b %d -e %d: need 4 <= min <= max bytes", c.Min, c.Max)
	case c.Factor < 2:
		return fmt.Errorf("-f %d: the size factor must be at least 2", c.Factor)
	case c.Warmup < 0 || c.Iters < 1:
		return fmt.Errorf("-w %d -n %d: need warm-up >= 0 and iterations >= 1", c.Warmup, c.Iters)
	}
	for _, a := range c.Algos {
		if a != "ring" && a != "mpi" && a != "hier" && a != "shm" {
			return fmt.Errorf("--algo %q: choose from ring, mpi, hier and shm", a)
		}
		if a == "shm" && c.Compress != mpi.None {
			return fmt.Errorf("--algo shm reduces float32 in place; --compress is for ring and hier")
		}
	}
	return nil
}

// Allreduce runs the benchmark on every rank; rank 0 writes the table.
//
// For each size and algorithm: one checked run on values whose sums are
// exact in float32 (the wrong column counts elements that differ from the
// expected sum on any rank), then Warmup untimed and Iters timed runs back
// to back between barriers. time is the slowest rank's mean per run; algbw
// = bytes / time; busbw = algbw x 2(N-1)/N, the bandwidth each rank's link
// must sustain for a ring, comparable across N (nccl-tests' definition).
func Allreduce(w *mpi.World, c AllreduceConfig, out io.Writer) error {
	if w.Rank() != 0 {
		out = io.Discard
	}
	n := w.Size()
	var hier *mpi.Hier
	if slices.Contains(c.Algos, "hier") {
		var err error
		if hier, err = w.NewHier(); err != nil {
			return err
		}
		defer hier.Free()
	}
	maxCount := c.Max / 4
	buf := make([]float32, maxCount)
	// shm and hier (within the host) reduce buffers in the segment the
	// host's ranks share, as training places its gradient there.
	bufs := map[string][]float32{}
	if hier != nil && w.LocalSize() > 1 {
		b, err := hier.UseShm(int(maxCount))
		if err != nil {
			return err
		}
		bufs["hier"] = b
	}
	var shm *mpi.Shm
	if slices.Contains(c.Algos, "shm") {
		if w.LocalSize() != n {
			return fmt.Errorf("--algo shm: the %d ranks span more than one host (%d on this one); shm is within a host (use hier)", n, w.LocalSize())
		}
		var err error
		if shm, err = w.NewShm(int(maxCount)); err != nil {
			return err
		}
		defer shm.Free()
		bufs["shm"] = shm.Region()
	}
	algos := Allreducers(w, hier, shm, c.Compress)
	wire := map[mpi.Compression]string{mpi.FP16: ":fp16", mpi.BF16: ":bf16"}[c.Compress]

	var memcpy float64
	if w.Rank() == 0 {
		memcpy = MemcpyGBs(buf, 64<<20)
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	fmt.Fprintf(out, "# train bench allreduce: %d rank(s), float32 sum in place, %d warm-up + %d timed iterations; ring segment %d KiB x %d slots\n",
		n, c.Warmup, c.Iters, mpi.RingSegment*4>>10, mpi.RingSlots)
	fmt.Fprintf(out, "# memcpy, 1 thread, 64 MiB (rank 0): %.2f GB/s\n", memcpy)
	if c.Compress != mpi.None && w.Rank() == 0 {
		fmt.Fprintf(out, "# %s encode + decode, 1 thread, 1 MiB of float32 (rank 0): %.2f GB/s\n", strings.TrimPrefix(wire, ":"), mpi.ConvertGBs(c.Compress, 1<<18))
	}
	c.header(out)
	for size := c.Min; size <= c.Max; size *= c.Factor {
		count := size / 4
		for _, name := range c.Algos {
			f := algos[name]
			b := buf[:count]
			if sb, ok := bufs[name]; ok {
				b = sb[:count]
			}
			label := name
			if name != "mpi" {
				label += wire
			}
			wrong, err := checkAllreduce(w, b, f, c.Compress != mpi.None)
			if err != nil {
				return err
			}
			for i := range b {
				b[i] = 1e-3
			}
			if err := c.row(w, out, count, label, wrong, func() error { return f(b, mpi.Sum) }); err != nil {
				return err
			}
		}
		if c.Factor > 1 && size > c.Max/c.Factor {
			break
		}
	}
	rss := []float64{float64(PeakRSS())}
	if err := w.AllreduceFloat64(rss, mpi.Max); err != nil {
		return err
	}
	fmt.Fprintf(out, "# peak resident memory, largest rank: %.1f MiB (buffer %.1f MiB; the ring's scratch is %d KiB)\n",
		rss[0]/(1<<20), float64(c.Max)/(1<<20), mpi.RingSegment*mpi.RingSlots*4>>10)
	if len(bufs) > 0 {
		fmt.Fprintf(out, "# shm and hier: one more %.1f MiB buffer per rank in shared memory, which RSS also counts where a rank read other ranks' copies\n", float64(c.Max)/(1<<20))
	}
	return nil
}

// header writes the table's column names.
func (c *AllreduceConfig) header(out io.Writer) {
	if c.CSV {
		fmt.Fprintln(out, "bytes,count,algo,time_us,algbw_gbs,busbw_gbs,wrong")
	} else {
		fmt.Fprintf(out, "%12s %11s %9s %11s %11s %11s %6s\n", "bytes", "count", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "wrong")
	}
}

// row times run (Warmup untimed, then Iters back to back between
// barriers; the slowest rank's mean) and writes one line of the table.
func (c *AllreduceConfig) row(w *mpi.World, out io.Writer, count int64, label string, wrong int64, run func() error) error {
	for range c.Warmup {
		if err := run(); err != nil {
			return err
		}
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	for range c.Iters {
		if err := run(); err != nil {
			return err
		}
	}
	el := []float64{time.Since(start).Seconds() / float64(c.Iters)}
	if err := w.AllreduceFloat64(el, mpi.Max); err != nil {
		return err
	}
	n, t := w.Size(), el[0]
	algbw := float64(count*4) / t / 1e9
	busbw := algbw * 2 * float64(n-1) / float64(n)
	if c.CSV {
		fmt.Fprintf(out, "%d,%d,%s,%.6g,%.6g,%.6g,%d\n", count*4, count, label, t*1e6, algbw, busbw, wrong)
	} else {
		fmt.Fprintf(out, "%12d %11d %9s %11.1f %11.3f %11.3f %6d\n", count*4, count, label, t*1e6, algbw, busbw, wrong)
	}
	return nil
}

// checkAllreduce runs f once on values that sum exactly and returns how
// many elements are wrong on any rank (summed over ranks).
func checkAllreduce(w *mpi.World, b []float32, f func([]float32, mpi.Op) error, small bool) (int64, error) {
	r, n := w.Rank(), w.Size()
	m := 97
	if small {
		m = 7 // sums up to 7 N(N+1)/2: exact in bf16 (8 bits) up to N = 7
	}
	for i := range b {
		b[i] = float32((i%m + 1) * (r + 1))
	}
	if err := f(b, mpi.Sum); err != nil {
		return 0, err
	}
	tri := n * (n + 1) / 2
	var wrong int64
	for i, v := range b {
		if v != float32((i%m+1)*tri) {
			wrong++
		}
	}
	sum := []int64{wrong}
	if err := w.AllreduceInt64(sum, mpi.Sum); err != nil {
		return 0, err
	}
	return sum[0], nil
}

// ParseAlgos splits a comma-separated list.
func ParseAlgos(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
