package mpi_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"train/mpi"
	"train/mpi/mpitest"
)

// world starts MPI in a rank launched by mpitest (mpitest.World: finalized
// after a pass, aborted after a failure).
func world(t *testing.T) *mpi.World {
	t.Helper()
	return mpitest.World(t)
}

// TestCollectives checks every collective of World under real mpirun, np 1 to 4.
func TestCollectives(t *testing.T) {
	for np := 1; np <= 4; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			if !mpitest.Launch(t, np, 60*time.Second) {
				return
			}
			w := world(t)
			n, r := w.Size(), w.Rank()
			if n != np || r < 0 || r >= n {
				t.Fatalf("rank %d of %d, want size %d", r, n, np)
			}
			// One host: the local rank is the world rank.
			if w.LocalRank() != r || w.LocalSize() != n {
				t.Errorf("local rank %d of %d, want %d of %d", w.LocalRank(), w.LocalSize(), r, n)
			}

			// Sum and mean of values that add exactly in float32; lengths
			// around the chunking and alignment edges, empty included.
			for _, length := range []int{0, 1, 7, 1000, 1 << 17} {
				buf := make([]float32, length)
				for i := range buf {
					buf[i] = float32(r+1) * float32(i%13)
				}
				if err := w.AllreduceFloat32(buf, mpi.Sum); err != nil {
					t.Fatal(err)
				}
				tri := float32(n * (n + 1) / 2)
				for i, v := range buf {
					if want := tri * float32(i%13); v != want {
						t.Fatalf("len %d: sum[%d] = %v, want %v", length, i, v, want)
					}
				}
				for i := range buf {
					buf[i] = float32(2 * r)
				}
				if err := w.AllreduceFloat32(buf, mpi.Mean); err != nil {
					t.Fatal(err)
				}
				for i, v := range buf {
					if want := float32(n - 1); v != want {
						t.Fatalf("len %d: mean[%d] = %v, want %v", length, i, v, want)
					}
				}
			}

			f64 := []float64{float64(r), 1e-300 * float64(r+1), -float64(r)}
			if err := w.AllreduceFloat64(f64, mpi.Max); err != nil {
				t.Fatal(err)
			}
			if f64[0] != float64(n-1) || f64[1] != 1e-300*float64(n) || f64[2] != 0 {
				t.Errorf("float64 max = %v", f64)
			}
			i64 := []int64{int64(r), math.MaxInt64 - int64(r)}
			if err := w.AllreduceInt64(i64, mpi.Min); err != nil {
				t.Fatal(err)
			}
			if i64[0] != 0 || i64[1] != math.MaxInt64-int64(n-1) {
				t.Errorf("int64 min = %v", i64)
			}

			// Broadcast from the last rank; the guard bytes past the slice
			// must survive (gompi's BcastBytes overruns by 4x).
			root := n - 1
			backing := make([]byte, 13+8)
			msg := backing[:13]
			for i := range backing {
				backing[i] = 0xEE
			}
			if r == root {
				copy(msg, "hello, ranks!")
			}
			if err := w.BcastBytes(msg, root); err != nil {
				t.Fatal(err)
			}
			if string(msg) != "hello, ranks!" {
				t.Errorf("bcast got %q", msg)
			}
			for i, b := range backing[13:] {
				if b != 0xEE {
					t.Fatalf("bcast wrote past the slice at byte %d", 13+i)
				}
			}
			fb := []float32{float32(r), float32(r)}
			if err := w.BcastFloat32(fb, root); err != nil {
				t.Fatal(err)
			}
			if fb[0] != float32(root) || fb[1] != float32(root) {
				t.Errorf("bcast float32 got %v", fb)
			}
			ib := []int64{int64(r)}
			if err := w.BcastInt64(ib, 0); err != nil || ib[0] != 0 {
				t.Errorf("bcast int64 got %v, %v", ib, err)
			}
			if err := w.BcastBytes(nil, 0); err != nil {
				t.Error(err)
			}
			if err := w.Barrier(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestErrorsReturn checks that a bad call returns an error naming the rank
// and the operation instead of killing the job (MPI_ERRORS_RETURN).
func TestErrorsReturn(t *testing.T) {
	if !mpitest.Launch(t, 2, 60*time.Second) {
		return
	}
	w := world(t)
	err := w.BcastFloat32(make([]float32, 4), 99) // no rank 99
	if err == nil {
		t.Fatal("broadcast from rank 99 of 2 succeeded")
	}
	want := fmt.Sprintf("rank %d: MPI_Bcast(float32): ", w.Rank())
	if got := err.Error(); len(got) <= len(want) || got[:len(want)] != want {
		t.Errorf("error %q, want prefix %q", got, want)
	}
}

// TestDup: a duplicate world reduces concurrently with the original, from
// another goroutine, without the two collectives mixing.
func TestDup(t *testing.T) {
	if !mpitest.Launch(t, 3, 60*time.Second) {
		return
	}
	w := world(t)
	d, err := w.Dup()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		for range 200 {
			b := []float64{1}
			if err := d.AllreduceFloat64(b, mpi.Sum); err != nil || b[0] != 3 {
				done <- fmt.Errorf("dup: %v %v", b, err)
				return
			}
		}
		done <- nil
	}()
	for range 200 {
		b := []float32{2, float32(w.Rank())}
		if err := w.AllreduceFloat32(b, mpi.Sum); err != nil || b[0] != 6 || b[1] != 3 {
			t.Fatalf("world: %v %v", b, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
}

// TestPointToPoint: every rank sends to rank 0, which probes and receives
// them in any order.
func TestPointToPoint(t *testing.T) {
	if !mpitest.Launch(t, 3, 60*time.Second) {
		return
	}
	w := world(t)
	const tag = 7
	if w.Rank() != 0 {
		if err := w.SendInt64([]int64{int64(w.Rank()), 42}, 0, tag); err != nil {
			t.Fatal(err)
		}
	} else {
		got := map[int64]bool{}
		deadline := time.Now().Add(10 * time.Second)
		for len(got) < 2 && time.Now().Before(deadline) {
			src, ok, err := w.Probe(tag)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				time.Sleep(time.Millisecond)
				continue
			}
			buf := make([]int64, 2)
			if err := w.RecvInt64(buf, src, tag); err != nil {
				t.Fatal(err)
			}
			if buf[0] != int64(src) || buf[1] != 42 {
				t.Errorf("from %d: %v", src, buf)
			}
			got[buf[0]] = true
		}
		if !got[1] || !got[2] {
			t.Errorf("received from %v", got)
		}
	}
	if err := w.Barrier(); err != nil {
		t.Fatal(err)
	}
}

// TestExchange: every rank swaps a header and a 1M-float message (far past
// the eager limit, so a blocking send waits for its receiver) with every
// other rank at once, which blocking sends in rank order would deadlock
// on; each receive gets exactly its sender's values, and the traffic
// counters grow by what was exchanged.
func TestExchange(t *testing.T) {
	const np, n = 3, 1 << 20
	if !mpitest.Launch(t, np, time.Minute) {
		return
	}
	w := world(t)
	r := w.Rank()
	var send, recv []mpi.Msg
	got := map[int][]float32{}
	hdr := map[int][]int64{}
	for p := range np {
		if p == r {
			continue
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(100*r + p + i%7)
		}
		send = append(send, mpi.Msg{I64: []int64{int64(r), int64(p)}, Peer: p, Tag: 1}, mpi.Msg{F32: v, Peer: p, Tag: 2})
		got[p], hdr[p] = make([]float32, n), make([]int64, 2)
		recv = append(recv, mpi.Msg{F32: got[p], Peer: p, Tag: 2}, mpi.Msg{I64: hdr[p], Peer: p, Tag: 1})
	}
	before := mpi.Counted()
	if err := w.Exchange(send, recv); err != nil {
		t.Fatal(err)
	}
	for p, v := range got {
		if hdr[p][0] != int64(p) || hdr[p][1] != int64(r) {
			t.Errorf("rank %d: header from %d: %v", r, p, hdr[p])
		}
		for i := range v {
			if want := float32(100*p + r + i%7); v[i] != want {
				t.Fatalf("rank %d: from %d: [%d] = %v, want %v", r, p, i, v[i], want)
			}
		}
	}
	d := mpi.Counted().Sub(before)
	if want := int64((np - 1) * (4*n + 16)); d.Sent != want || d.Received != want {
		t.Errorf("rank %d: counted %d sent, %d received, want %d each", r, d.Sent, d.Received, want)
	}
	if err := w.Exchange(nil, nil); err != nil {
		t.Errorf("empty exchange: %v", err)
	}
}
