package gpu_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"train/gpu"
	"train/internal/near"
	"train/mpi"
	"train/mpi/mpitest"
)

// TestRing runs our GPU ring allreduce under real mpirun with 2, 3 and 4
// ranks sharing the one GPU, over both transports (CUDA IPC and pinned host
// buffers with small segments), on lengths that stress chunking: exact
// integer sums must come out exactly, means within rounding, and every rank
// must end with the same bits.
func TestRing(t *testing.T) {
	if _, err := gpu.Count(); err != nil && !mpitest.InRank() {
		t.Skipf("no GPU here (%v): GPU tests run on the GPU machine (scripts/gpu-check.sh)", err)
	}
	for _, np := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			w, c := gpuRank(t, np, 3*time.Minute)
			if w == nil {
				return
			}
			gpu.RingSegment = 64 << 10
			for _, mode := range []string{"ipc", "host"} {
				r, err := gpu.NewRing(c, w, mode)
				if err != nil {
					t.Fatal(err)
				}
				// One allocation for all lengths, as the gradient buffer is
				// one: the IPC transport maps each allocation once.
				b := c.MustAlloc(1<<20 + 8)
				for _, n := range []int{1, np - 1, np + 1, 99991, 1<<20 + 3} {
					for _, mean := range []bool{false, true} {
						checkGPURing(t, w, b, r.Allreduce, n, mean, mode)
					}
				}
				r.Close()
				b.Close()
			}
		})
	}
}

// gpuRank runs the calling test under mpirun on np ranks (nil in the
// parent) and, in a rank, returns MPI's world and the GPU, finalizing MPI
// when the test ends.
func gpuRank(t *testing.T, np int, timeout time.Duration) (*mpi.World, *gpu.Ctx) {
	t.Helper()
	if !mpitest.Launch(t, np, timeout) {
		return nil, nil
	}
	w := mpitest.World(t)
	c, err := gpu.Open(w.LocalRank(), "fp32", gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w, c
}

func checkGPURing(t *testing.T, w *mpi.World, b *gpu.Buf, allreduce func(*gpu.Buf, bool) error, n int, mean bool, what string) {
	t.Helper()
	N, me := w.Size(), w.Rank()
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((i%1000)*(me+1) - 300)
	}
	view := b.Slice(3, n) // a view with an offset, as gradient buckets are
	if err := view.Upload(v); err != nil {
		t.Fatal(err)
	}
	if err := allreduce(view, mean); err != nil {
		t.Fatalf("%s n=%d: %v", what, n, err)
	}
	got := make([]float32, n)
	if err := view.Download(got); err != nil {
		t.Fatal(err)
	}
	tri := float32(N * (N + 1) / 2)
	for i, g := range got {
		want := float32(i%1000)*tri - float32(300*N)
		if mean {
			want /= float32(N)
		}
		if (!mean && g != want) || !near.Close(float64(want), float64(g), 1e-5, 1e-6) {
			t.Fatalf("%s n=%d mean=%v: [%d] = %v, want %v", what, n, mean, i, g, want)
		}
	}
	// Identical bits on every rank: max and min over the ranks agree.
	hi, lo := append([]float32(nil), got...), append([]float32(nil), got...)
	w.AllreduceFloat32(hi, mpi.Max)
	w.AllreduceFloat32(lo, mpi.Min)
	for i := range hi {
		if hi[i] != lo[i] {
			t.Fatalf("%s n=%d: ranks differ at %d: %v vs %v", what, n, i, lo[i], hi[i])
		}
	}
}

// TestNCCL checks NCCL's allreduce where it can run: one rank always, two
// where the node has a GPU per rank. Where two ranks must share a GPU,
// NCCL is refused up front (it wants one GPU per rank): the test checks
// that refusal, then skips, since NCCL's allreduce did not run.
func TestNCCL(t *testing.T) {
	if _, err := gpu.Count(); err != nil && !mpitest.InRank() {
		t.Skipf("no GPU here (%v): GPU tests run on the GPU machine (scripts/gpu-check.sh)", err)
	}
	for _, np := range []int{1, 2} {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			w, c := gpuRank(t, np, 2*time.Minute)
			if w == nil {
				return
			}
			gpus, _ := gpu.Count()
			x, err := gpu.NewNCCL(c, w)
			if w.LocalSize() > gpus {
				if err == nil || !strings.Contains(err.Error(), "one GPU per rank") {
					t.Fatalf("%d ranks on %d GPU(s): NewNCCL gave %v, want the one-GPU-per-rank refusal", w.LocalSize(), gpus, err)
				}
				t.Skipf("NCCL at np=%d needs %d GPUs, this node has %d: the refusal was checked, NCCL's allreduce was not run", np, np, gpus)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			b := c.MustAlloc(99999)
			defer b.Close()
			checkGPURing(t, w, b, x.Allreduce, 99991, true, "nccl")
		})
	}
}
