package mpi_test

import (
	"runtime"
	"testing"
	"time"

	"train/mpi"
	"train/mpi/mpitest"
)

// TestNonBlocking: a pipeline's pattern on 3 ranks in a line. Each rank
// posts the receive of its left neighbour's message and the send to its
// right one, of a size that goes by rendezvous (4 MB), runs the garbage
// collector and computes meanwhile, then waits; the values must be the
// left neighbour's. Test polls a second round to completion; a receive
// from a rank that does not exist fails with the rank and the call.
func TestNonBlocking(t *testing.T) {
	if !mpitest.Launch(t, 3, 60*time.Second) {
		return
	}
	w := world(t)
	r, n := w.Rank(), w.Size()
	const size = 1 << 20
	for round := range 2 {
		send := make([]float32, size)
		for i := range send {
			send[i] = float32(r*1000 + i%997 + round)
		}
		recv := make([]float32, size)
		var reqs []*mpi.Request
		if r > 0 {
			q, err := w.IrecvFloat32(recv, r-1, 5)
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, q)
		}
		if r < n-1 {
			q, err := w.IsendFloat32(send, r+1, 5)
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, q)
		}
		runtime.GC()
		sum := 0.0
		for i := range 1 << 22 {
			sum += float64(i & 7)
		}
		if sum == 0 {
			t.Fatal("no work done")
		}
		if round == 0 {
			if err := mpi.WaitAll(reqs...); err != nil {
				t.Fatal(err)
			}
		} else {
			deadline := time.Now().Add(20 * time.Second)
			for _, q := range reqs {
				for {
					done, err := q.Test()
					if err != nil {
						t.Fatal(err)
					}
					if done {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("Test never reported done")
					}
				}
				if err := q.Wait(); err != nil { // a second wait is harmless
					t.Fatal(err)
				}
			}
		}
		if r > 0 {
			for i, v := range recv {
				if want := float32((r-1)*1000 + i%997 + round); v != want {
					t.Fatalf("round %d: recv[%d] = %v, want %v", round, i, v, want)
				}
			}
		}
	}
	if _, err := w.IrecvFloat32(make([]float32, 4), n+5, 1); err == nil {
		t.Error("a receive from a rank that does not exist was accepted")
	}
}
