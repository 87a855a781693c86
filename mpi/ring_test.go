package mpi_test

import (
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"train/internal/near"
	"train/mpi"
	"train/mpi/mpitest"
)

// TestRingAllreduce compares the ring with MPI_Allreduce under real mpirun
// for np = 1..5 on the lengths that stress chunking: 0, 1, N-1, N, N+1, a
// prime near 1e5 and 2^20+3. On values that add exactly in float32 the two
// must agree bit for bit; on random values within float32 rounding. Every
// rank must end with the same bits.
func TestRingAllreduce(t *testing.T) {
	for np := 1; np <= 5; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			if !mpitest.Launch(t, np, 3*time.Minute) {
				return
			}
			w := world(t)
			n, r := w.Size(), w.Rank()
			// Small segments so that even short buffers cross segment
			// boundaries and reuse every scratch slot.
			defer func(s, k int) { mpi.RingSegment, mpi.RingSlots = s, k }(mpi.RingSegment, mpi.RingSlots)
			for _, seg := range []int{7, 64 << 10} {
				mpi.RingSegment, mpi.RingSlots = seg, 3
				for _, length := range []int{0, 1, max(n-1, 0), n, n + 1, 99991, 1<<20 + 3} {
					for _, op := range []mpi.Op{mpi.Sum, mpi.Mean} {
						checkRing(t, w, length, op, seg)
					}
				}
			}
			_ = r
		})
	}
}

func checkRing(t *testing.T, w *mpi.World, length int, op mpi.Op, seg int) {
	t.Helper()
	r := w.Rank()
	name := fmt.Sprintf("len %d op %d seg %d", length, op, seg)
	// Exact: small integers times (rank+1); sums stay far below 2^24.
	exact := make([]float32, length)
	for i := range exact {
		exact[i] = float32((i%1000)*(r+1) - 300)
	}
	viaMPI := slices.Clone(exact)
	before := mpi.Counted()
	if err := w.RingAllreduceFloat32(exact, op); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// The traffic counters see what the ring moves: every chunk but the
	// one it completes in reduce-scatter, every chunk but the one its left
	// neighbour completes in all-gather; as much received as sent.
	if n := w.Size(); n > 1 {
		got := mpi.Counted().Sub(before)
		if want := 4 * ringValuesSent(length, n, r); got.Sent != want || got.Collective != 0 {
			t.Fatalf("%s: counted %+v, want %d bytes sent and no collective", name, got, want)
		}
	}
	before = mpi.Counted()
	if err := w.AllreduceFloat32(viaMPI, op); err != nil {
		t.Fatal(err)
	}
	if got := mpi.Counted().Sub(before); got.Collective != 4*int64(length) || got.Sent != 0 {
		t.Fatalf("%s: MPI_Allreduce counted %+v, want %d collective bytes", name, got, 4*length)
	}
	for i := range exact {
		if op == mpi.Sum && exact[i] != viaMPI[i] {
			t.Fatalf("%s: ring[%d] = %v, MPI_Allreduce %v", name, i, exact[i], viaMPI[i])
		}
		// A mean divides by N: one rounding, possibly in another place.
		if op == mpi.Mean && !near.Close(float64(viaMPI[i]), float64(exact[i]), 1e-6, 0) {
			t.Fatalf("%s: ring mean[%d] = %v, MPI_Allreduce %v", name, i, exact[i], viaMPI[i])
		}
	}
	// Random: equal up to the rounding of a different summation order.
	rng := rand.New(rand.NewPCG(uint64(length), uint64(r)))
	random := make([]float32, length)
	for i := range random {
		random[i] = float32(rng.NormFloat64())
	}
	ref := slices.Clone(random)
	if err := w.RingAllreduceFloat32(random, op); err != nil {
		t.Fatal(err)
	}
	if err := w.AllreduceFloat32(ref, op); err != nil {
		t.Fatal(err)
	}
	n := float64(w.Size())
	for i := range random {
		// |error| <= (N-1) ulp of the running sum; the sum of N unit
		// normals is below 6*sqrt(N) essentially always.
		if !near.Close(float64(ref[i]), float64(random[i]), 0, n*1.2e-7*6*math.Sqrt(n)) {
			t.Fatalf("%s: random ring[%d] = %v, MPI_Allreduce %v", name, i, random[i], ref[i])
		}
	}
	for _, buf := range [][]float32{exact, random} {
		sameOnAllRanks(t, w, buf, name)
	}
}

// sameOnAllRanks fails the test unless every rank holds buf's bits.
func sameOnAllRanks(t *testing.T, w *mpi.World, buf []float32, what string) {
	t.Helper()
	sum := []int64{int64(crc32.ChecksumIEEE(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 4*len(buf))))}
	lo, hi := slices.Clone(sum), slices.Clone(sum)
	if err := w.AllreduceInt64(lo, mpi.Min); err != nil {
		t.Fatal(err)
	}
	if err := w.AllreduceInt64(hi, mpi.Max); err != nil {
		t.Fatal(err)
	}
	if lo[0] != hi[0] {
		t.Fatalf("%s: ranks hold different results", what)
	}
}

// ringValuesSent is how many values rank r of n sends in a ring allreduce
// of length values: every chunk but the one it completes in
// reduce-scatter (r+1) and the one its left neighbour completes in
// all-gather (r+2); chunks differ by at most one value.
func ringValuesSent(length, n, r int) int64 {
	q, rem := length/n, length%n
	chunk := func(i int) int64 {
		if i < rem {
			return int64(q + 1)
		}
		return int64(q)
	}
	return 2*int64(length) - chunk((r+1)%n) - chunk((r+2)%n)
}

// TestAddFloat32 checks the ring's reduction kernel on lengths around its
// vector widths.
func TestAddFloat32(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 1000} {
		dst := make([]float32, n+1)
		src := make([]float32, n)
		for i := range src {
			dst[i], src[i] = float32(i), float32(2*i)+0.5
		}
		dst[n] = -1 // past the end: must stay
		mpi.AddFloat32(dst[:n], src)
		for i := range n {
			if dst[i] != float32(3*i)+0.5 {
				t.Fatalf("n=%d: dst[%d] = %v", n, i, dst[i])
			}
		}
		if dst[n] != -1 {
			t.Fatalf("n=%d: wrote past the end", n)
		}
	}
}

// TestHierAllreduce: on one host the hierarchical allreduce is a reduce to
// local rank 0 and a broadcast; exact on integer-valued data against
// MPI_Allreduce, within rounding for the mean, the same bits everywhere.
// (Across hosts, with the leaders' ring, it runs in the namespace-cluster
// test at the root of the repository.)
func TestHierAllreduce(t *testing.T) {
	for np := 1; np <= 4; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			if !mpitest.Launch(t, np, time.Minute) {
				return
			}
			w := world(t)
			h, err := w.NewHier()
			if err != nil {
				t.Fatal(err)
			}
			defer h.Free()
			if h.Hosts() != 1 {
				t.Errorf("hosts = %d on one machine", h.Hosts())
			}
			for _, length := range []int{0, 1, 7, 99991} {
				for _, op := range []mpi.Op{mpi.Sum, mpi.Mean} {
					buf := make([]float32, length)
					for i := range buf {
						buf[i] = float32((i%1000)*(w.Rank()+1) - 300)
					}
					ref := slices.Clone(buf)
					if err := h.AllreduceFloat32(buf, op); err != nil {
						t.Fatal(err)
					}
					if err := w.AllreduceFloat32(ref, op); err != nil {
						t.Fatal(err)
					}
					for i := range buf {
						if !near.Close(float64(ref[i]), float64(buf[i]), 1e-6, 0) {
							t.Fatalf("len %d op %d: hier[%d] = %v, MPI_Allreduce %v", length, op, i, buf[i], ref[i])
						}
					}
					sameOnAllRanks(t, w, buf, fmt.Sprintf("hier len %d op %d", length, op))
				}
			}
		})
	}
}

// TestShmAllreduce: the shared-memory allreduce under real mpirun, np =
// 1..5, on slices at several offsets of the segment (lengths that stress
// its 64-byte chunking: 0, 1, 15, 16, 17, a prime near 1e5, 2^20+3):
// exact against MPI_Allreduce on integer-valued data, within rounding for
// the mean, the same bits on every rank, and nothing outside the slice
// touched; on random values the ring's bits exactly (the same order of
// summation); then a broadcast from the last rank. Hier over the segment
// gives the same sums.
func TestShmAllreduce(t *testing.T) {
	for np := 1; np <= 5; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			if !mpitest.Launch(t, np, 3*time.Minute) {
				return
			}
			w := world(t)
			const total = 1<<20 + 64
			s, err := w.NewShm(total)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Free()
			region := s.Region()
			if s.Holds(make([]float32, 4)) || !s.Holds(region[3:9]) {
				t.Fatal("Holds is wrong about a buffer outside or inside the region")
			}
			for _, off := range []int{0, 3, 16} {
				for _, length := range []int{0, 1, 15, 16, 17, 99991, 1<<20 + 3} {
					if off+length+8 > total {
						continue
					}
					for _, op := range []mpi.Op{mpi.Sum, mpi.Mean} {
						for i := range region {
							region[i] = -7
						}
						buf := region[off : off+length]
						for i := range buf {
							buf[i] = float32((i%1000)*(w.Rank()+1) - 300)
						}
						ref := slices.Clone(buf)
						if err := s.AllreduceFloat32(buf, op); err != nil {
							t.Fatal(err)
						}
						if err := w.AllreduceFloat32(ref, op); err != nil {
							t.Fatal(err)
						}
						tol := 0.0
						if op == mpi.Mean {
							tol = 1e-6
						}
						for i := range buf {
							if !near.Close(float64(ref[i]), float64(buf[i]), tol, 0) {
								t.Fatalf("off %d len %d op %d: shm[%d] = %v, MPI_Allreduce %v", off, length, op, i, buf[i], ref[i])
							}
						}
						if region[off+length] != -7 || (off > 0 && region[off-1] != -7) {
							t.Fatalf("off %d len %d: values outside the slice changed", off, length)
						}
						sameOnAllRanks(t, w, buf, fmt.Sprintf("shm off %d len %d op %d", off, length, op))
						if err := w.Barrier(); err != nil { // nobody rewrites region before all compared
							t.Fatal(err)
						}
					}
				}
			}
			rng := rand.New(rand.NewPCG(uint64(w.Rank()), 9))
			for _, length := range []int{1, 16, 17, 99991, 1<<20 + 3} {
				for _, op := range []mpi.Op{mpi.Sum, mpi.Mean} {
					buf := region[16 : 16+length]
					for i := range buf {
						buf[i] = float32(rng.NormFloat64())
					}
					ring := slices.Clone(buf)
					if err := s.AllreduceFloat32(buf, op); err != nil {
						t.Fatal(err)
					}
					// Segments change when values are added, not how: the
					// reference runs on the default ones, quicker.
					mpi.RingSegment, mpi.RingSlots = 64<<10, 4
					if err := w.RingAllreduceFloat32(ring, op); err != nil {
						t.Fatal(err)
					}
					mpi.RingSegment, mpi.RingSlots = 5, 2
					for i := range buf {
						if math.Float32bits(buf[i]) != math.Float32bits(ring[i]) {
							t.Fatalf("len %d op %d: shm[%d] = %v, the ring's %v: not the same bits", length, op, i, buf[i], ring[i])
						}
					}
					if err := w.Barrier(); err != nil {
						t.Fatal(err)
					}
				}
			}
			buf := region[5:1005]
			for i := range buf {
				buf[i] = float32(w.Rank()*1000 + i)
			}
			if err := s.BcastFloat32(buf, w.Size()-1); err != nil {
				t.Fatal(err)
			}
			for i, v := range buf {
				if v != float32((w.Size()-1)*1000+i) {
					t.Fatalf("bcast: [%d] = %v, want %d", i, v, (w.Size()-1)*1000+i)
				}
			}
			// The blocks' claim counters go by turns over every call, a
			// bcast's too (shm.c): an allreduce right after a bcast, and
			// another after it, sum every block.
			for k := range 2 {
				sumsLikeMPI(t, w, region[:99991], k, fmt.Sprintf("allreduce %d after a bcast", k+1), func(b []float32) error { return s.AllreduceFloat32(b, mpi.Sum) })
				if err := w.Barrier(); err != nil {
					t.Fatal(err)
				}
			}

			// A rank whose slice differs (the last rank's shorter, then at
			// another offset, then empty): every rank fails at that call,
			// naming it, nothing changes, and the next call is whole again.
			// The empty one returned at once on that rank before, leaving
			// the others at the barrier.
			if w.Size() > 1 {
				last := w.Size() - 1
				for k, sl := range [][2]int{{0, 5000}, {16, 10000}, {0, 0}} {
					for i := range region[:20000] {
						region[i] = float32(w.Rank() + 1)
					}
					off, length := 0, 10000
					if w.Rank() == last {
						off, length = sl[0], sl[1]
					}
					err := s.AllreduceFloat32(region[off:off+length], mpi.Sum)
					want := fmt.Sprintf("rank %d called it on %d floats at offset %d of its region, rank 0 on 10000 at 0", last, sl[1], sl[0])
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("case %d: slices differ: error %v, want one saying %q", k, err, want)
					}
					for i, v := range region[:20000] {
						if v != float32(w.Rank()+1) {
							t.Fatalf("case %d: slices differ: [%d] = %v, changed", k, i, v)
						}
					}
					if err := s.BcastFloat32(region[off:off+length], 0); err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("case %d: bcast with slices that differ: error %v", k, err)
					}
					if err := s.AllreduceFloat32(region[:10000], mpi.Sum); err != nil {
						t.Fatal(err)
					}
					if sum := float32(w.Size() * (w.Size() + 1) / 2); region[0] != sum || region[9999] != sum || region[10000] != float32(w.Rank()+1) {
						t.Fatalf("case %d: the allreduce after: [0] %v [9999] %v [10000] %v, want %v %v %v", k, region[0], region[9999], region[10000], sum, sum, w.Rank()+1)
					}
					if err := w.Barrier(); err != nil {
						t.Fatal(err)
					}
				}
			}

			h, err := w.NewHier()
			if err != nil {
				t.Fatal(err)
			}
			defer h.Free()
			hb, err := h.UseShm(99991)
			if err != nil {
				t.Fatal(err)
			}
			sumsLikeMPI(t, w, hb, 0, "hier over shared memory", func(b []float32) error { return h.AllreduceFloat32(b, mpi.Sum) })
			ref := slices.Clone(hb)
			// The last rank's slice empty, the others' not: every rank of
			// the host fails at that call, nothing changed.
			if w.Size() > 1 {
				last := w.Size() - 1
				mine := hb
				if w.Rank() == last {
					mine = hb[:0]
				}
				err := h.AllreduceFloat32(mine, mpi.Sum)
				want := fmt.Sprintf("rank %d called it on 0 floats at offset 0 of its region, rank 0 on 99991 at 0", last)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("hier, an empty slice on rank %d: error %v, want one saying %q", last, err, want)
				}
				if !slices.Equal(hb, ref) {
					t.Fatal("hier, an empty slice on one rank: values changed")
				}
			}
		})
	}
}

// sumsLikeMPI fills buf with integers (exact sums in any order, different
// on every rank and for every k), sums it with reduce, and fails the test,
// naming what, where that is not MPI_Allreduce's sum of the same values.
func sumsLikeMPI(t *testing.T, w *mpi.World, buf []float32, k int, what string, reduce func([]float32) error) {
	t.Helper()
	for i := range buf {
		buf[i] = float32((i%1000)*(w.Rank()+1) - 300 + k)
	}
	ref := slices.Clone(buf)
	if err := reduce(buf); err != nil {
		t.Fatal(err)
	}
	if err := w.AllreduceFloat32(ref, mpi.Sum); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(buf, ref) {
		t.Fatalf("%s differs from MPI_Allreduce on integer-valued data", what)
	}
}

// TestRingCompressed: with fp16 or bf16 on the wire the ring's result is
// MPI_Allreduce's within the format's rounding (one rounding per hop and
// one at the end), every rank holds the same bits, the traffic counters
// see half the bytes, and a value representable in the format with sums
// that are too (small integers) comes out exact.
func TestRingCompressed(t *testing.T) {
	for np := 1; np <= 4; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			if !mpitest.Launch(t, np, time.Minute) {
				return
			}
			w := world(t)
			n, r := w.Size(), w.Rank()
			for _, c := range []struct {
				comp mpi.Compression
				eps  float64
			}{{mpi.FP16, 1.0 / 2048}, {mpi.BF16, 1.0 / 256}} {
				for _, length := range []int{0, 1, n + 1, 99991} {
					for _, op := range []mpi.Op{mpi.Sum, mpi.Mean} {
						rng := rand.New(rand.NewPCG(uint64(length), uint64(r)))
						buf := make([]float32, length)
						for i := range buf {
							buf[i] = float32(rng.NormFloat64())
						}
						ref := slices.Clone(buf)
						before := mpi.Counted()
						if err := w.RingAllreduceCompressed(buf, op, c.comp); err != nil {
							t.Fatal(err)
						}
						got := mpi.Counted().Sub(before)
						if err := w.AllreduceFloat32(ref, op); err != nil {
							t.Fatal(err)
						}
						scale := 1.0
						if op == mpi.Mean {
							scale = 1 / float64(n)
						}
						for i := range buf {
							// Partial sums of N unit normals stay below 6 sqrt(N).
							if !near.Close(float64(ref[i]), float64(buf[i]), 0, float64(n+1)*c.eps*6*math.Sqrt(float64(n))*scale) {
								t.Fatalf("comp %d len %d op %d: ring[%d] = %v, MPI_Allreduce %v", c.comp, length, op, i, buf[i], ref[i])
							}
						}
						if n > 1 && length > 0 {
							if want := 2 * ringValuesSent(length, n, r); got.Sent != want {
								t.Fatalf("comp %d len %d: %d bytes sent, want %d (16 bits a value)", c.comp, length, got.Sent, want)
							}
						}
						sameOnAllRanks(t, w, buf, fmt.Sprintf("comp %d len %d op %d", c.comp, length, op))
					}
				}
				exact := make([]float32, 1000)
				for i := range exact {
					exact[i] = float32(i%16 - 8)
				}
				if err := w.RingAllreduceCompressed(exact, mpi.Sum, c.comp); err != nil {
					t.Fatal(err)
				}
				for i, v := range exact {
					if want := float32((i%16 - 8) * n); v != want {
						t.Fatalf("comp %d: exact[%d] = %v, want %v", c.comp, i, v, want)
					}
				}
			}
		})
	}
}

// TestRingHalves checks the ring's halves on their own (ZeRO's
// communication) under real mpirun for np = 1..4, on uneven ranges with
// empty ones among them, on random values whose sums depend on their
// order: after the reduce-scatter each rank's own range holds the bits
// RingAllreduceFloat32 gives it, and MPI_Allreduce's values within
// rounding; the all-gather then puts every rank's range on every rank;
// the reduce-scatter sends every value but those of its own range that
// the allreduce's first half completes on it (at np=2, every value but
// its own range's).
func TestRingHalves(t *testing.T) {
	for np := 1; np <= 4; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			if !mpitest.Launch(t, np, 2*time.Minute) {
				return
			}
			w := world(t)
			n, r := w.Size(), w.Rank()
			defer func(s, k int) { mpi.RingSegment, mpi.RingSlots = s, k }(mpi.RingSegment, mpi.RingSlots)
			mpi.RingSegment, mpi.RingSlots = 5, 2
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for _, length := range []int{0, 1, 3, 17, 1000, 65537} {
				// Rank k owns [cut[k], cut[k+1]): ZeRO's padded shards of a
				// range that starts inside one of them.
				s := (length + 2 + n - 1) / n
				cut := make([]int, n+1)
				for k := range cut {
					cut[k] = min(max(k*s-2, 0), length)
				}
				cut[n] = length
				owned := func(k int) (int, int) { return cut[k], cut[k+1] }
				for _, op := range []mpi.Op{mpi.Sum, mpi.Mean} {
					name := fmt.Sprintf("len %d op %d", length, op)
					buf := make([]float32, length)
					for i := range buf {
						buf[i] = (rng.Float32() - 0.5) * float32(math.Pow(2, float64(rng.IntN(12))))
					}
					ring, ref := slices.Clone(buf), slices.Clone(buf)
					before := mpi.Counted()
					if err := w.RingReduceScatterFloat32(buf, owned, op); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					sent := mpi.Counted().Sub(before).Sent
					// Segments change when values are added, not how: the
					// reference runs on the default ones, quicker.
					mpi.RingSegment, mpi.RingSlots = 64<<10, 4
					if err := w.RingAllreduceFloat32(ring, op); err != nil {
						t.Fatal(err)
					}
					mpi.RingSegment, mpi.RingSlots = 5, 2
					if err := w.AllreduceFloat32(ref, op); err != nil {
						t.Fatal(err)
					}
					lo, hi := owned(r)
					for i := lo; i < hi; i++ {
						if math.Float32bits(buf[i]) != math.Float32bits(ring[i]) {
							t.Fatalf("%s: rank %d's own [%d] = %v after the reduce-scatter, the ring allreduce %v", name, r, i, buf[i], ring[i])
						}
						if !near.Close(float64(ref[i]), float64(buf[i]), 1e-5, 2e-3) {
							t.Fatalf("%s: rank %d's own [%d] = %v after the reduce-scatter, MPI_Allreduce %v", name, r, i, buf[i], ref[i])
						}
					}
					// The allreduce's first half completes chunk r+1 of an
					// even cut on rank r.
					q, rem := length/n, length%n
					k := (r + 1) % n
					clo := k*q + min(k, rem)
					chi := clo + q
					if k < rem {
						chi++
					}
					keep := max(0, min(chi, hi)-max(clo, lo))
					if n == 2 {
						keep = hi - lo // the ring cut by the owned ranges
					}
					if want := 4 * int64(length-keep); n > 1 && sent != want {
						t.Fatalf("%s: the reduce-scatter sent %d bytes, want %d", name, sent, want)
					}
					before = mpi.Counted()
					if err := w.RingAllgatherFloat32(buf, owned); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					sent = mpi.Counted().Sub(before).Sent
					for i := range buf {
						if !near.Close(float64(ref[i]), float64(buf[i]), 1e-5, 2e-3) {
							t.Fatalf("%s: [%d] = %v after the all-gather, MPI_Allreduce %v", name, i, buf[i], ref[i])
						}
					}
					sameOnAllRanks(t, w, buf, name)
					// The all-gather sends every range but its right
					// neighbour's.
					rl, rh := owned((r + 1) % n)
					if want := 4 * int64(length-(rh-rl)); n > 1 && sent != want {
						t.Fatalf("%s: the all-gather sent %d bytes, want %d", name, sent, want)
					}
				}
			}
		})
	}
}

// TestRingMismatch: two ranks that pass the ring slices of different
// lengths both fail at the call, each naming the other's message, instead
// of one returning and leaving the other waiting. Each message's tag
// carries its sender's slice length modulo 8191 and whether it ends the
// sender's part of the step; at 2 ranks each rank is the other's left
// neighbour, so both see the difference in the first step: in the first
// message where the lengths differ modulo 8191, else where the parts'
// segments part ways (segments of 7 floats here: 28 floats are chunks of
// 14, two segments; 8219 = 28 + 8191 chunks of 4109 and 4110). One case a
// launch: a failed step leaves sends unmatched on the ring's
// communicator, which the job is then meant to end with.
func TestRingMismatch(t *testing.T) {
	const suffix = ": every rank must pass the same slice"
	halves := func(n int) func(int) (int, int) {
		return func(k int) (int, int) { return k * n / 2, (k + 1) * n / 2 }
	}
	for _, c := range []struct {
		name   string
		length [2]int
		call   func(w *mpi.World, buf []float32) error
		want   [2]string // each rank's error after "rank L's message "
	}{
		{"empty", [2]int{100, 0}, func(w *mpi.World, b []float32) error { return w.RingAllreduceFloat32(b, mpi.Sum) },
			[2]string{"holds 0 floats where this rank expected 7, from a slice of another length",
				"holds 7 floats where this rank expected 0, from a slice of another length"}},
		{"one more", [2]int{1000, 1001}, func(w *mpi.World, b []float32) error { return w.RingAllreduceFloat32(b, mpi.Sum) },
			[2]string{"comes from a slice of another length", "comes from a slice of another length"}},
		{"same length mod 8191", [2]int{28, 8219}, func(w *mpi.World, b []float32) error { return w.RingAllreduceFloat32(b, mpi.Mean) },
			[2]string{"is not the last of its part, where this rank's part ends",
				"is the last of its part, where this rank expected more"}},
		{"bf16 empty", [2]int{0, 100}, func(w *mpi.World, b []float32) error { return w.RingAllreduceCompressed(b, mpi.Sum, mpi.BF16) },
			[2]string{"holds 7 floats where this rank expected 0, from a slice of another length",
				"holds 0 floats where this rank expected 7, from a slice of another length"}},
		{"reduce-scatter", [2]int{28, 8219}, func(w *mpi.World, b []float32) error {
			return w.RingReduceScatterFloat32(b, halves(len(b)), mpi.Sum)
		}, [2]string{"is not the last of its part, where this rank's part ends",
			"is the last of its part, where this rank expected more"}},
		// The all-gather's one message a step lands straight in place.
		{"all-gather", [2]int{100, 0}, func(w *mpi.World, b []float32) error { return w.RingAllgatherFloat32(b, halves(len(b))) },
			[2]string{"holds 0 floats where this rank expected 50, from a slice of another length",
				"holds more than the 0 floats this rank expected"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !mpitest.Launch(t, 2, time.Minute) {
				return
			}
			w := world(t)
			r := w.Rank()
			defer func(s, k int) { mpi.RingSegment, mpi.RingSlots = s, k }(mpi.RingSegment, mpi.RingSlots)
			mpi.RingSegment, mpi.RingSlots = 7, 3
			buf := make([]float32, c.length[r])
			for i := range buf {
				buf[i] = float32(i)
			}
			err := c.call(w, buf)
			want := fmt.Sprintf("of %d floats: rank %d's message %s%s", c.length[r], 1-r, c.want[r], suffix)
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Fatalf("rank %d: error %v, want one ending %q", r, err, want)
			}
		})
	}
}
