package trainer

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"train/model"
	"train/mpi"
)

func TestMakeBuckets(t *testing.T) {
	p := &model.Params{}
	p.Add("a", 100) // @0
	p.Add("b", 10)  // @100
	p.Add("c", 300) // @110
	p.Add("d", 5)   // @410
	p.Add("e", 5)   // @415, end 420
	for _, tc := range []struct {
		capBytes int
		want     string
	}{
		{0, "[{0 420}]"},
		{4 * 1000, "[{0 420}]"}, // everything fits one bucket
		{4 * 10, "[{410 420} {110 410} {100 110} {0 100}]"}, // d+e reach the cap; then c, b, a alone
		{4 * 5, "[{415 420} {410 415} {110 410} {100 110} {0 100}]"},
		{4 * 200, "[{110 420} {0 110}]"},
	} {
		got := fmt.Sprint(makeBuckets(p, tc.capBytes))
		if got != tc.want {
			t.Errorf("cap %d bytes: %s, want %s", tc.capBytes, got, tc.want)
		}
	}
}

// TestGradSyncOverlap drives gradSync in one process with a fake reducer:
// buckets go to the communication goroutine as soon as backward reports
// them final, in backward order; without overlap they go after backward.
// (The real allreduces under mpirun are in the end-to-end tests.)
func TestGradSyncOverlap(t *testing.T) {
	grad := make([]float32, 420)
	bs := []bucket{{410, 420}, {110, 410}, {0, 110}}
	for _, overlap := range []bool{true, false} {
		var order []int
		started := make(chan int, 3)
		reduce := func(b []float32, op mpi.Op) error {
			if op != mpi.Mean {
				t.Errorf("op %v, want Mean", op)
			}
			order = append(order, len(b))
			started <- len(b)
			return nil
		}
		g := newGradSync(reduce, grad, bs, overlap)
		g.begin()
		g.ready(415) // not yet a whole bucket
		g.ready(410) // bucket {410,420} final
		if overlap {
			if n := <-started; n != 10 {
				t.Errorf("first bucket reduced has %d floats, want 10", n)
			}
		} else if len(started) != 0 {
			t.Error("reduced during backward without overlap")
		}
		g.ready(0)
		if err := g.finish(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(order, []int{10, 300, 110}) {
			t.Errorf("overlap=%v: reduced %v", overlap, order)
		}
		g.close()
	}
	// A failing or panicking reducer is an error from finish.
	for _, bad := range []func([]float32, mpi.Op) error{
		func([]float32, mpi.Op) error { return errors.New("link down") },
		func([]float32, mpi.Op) error { panic("oops") },
	} {
		g := newGradSync(bad, grad, bs, true)
		g.begin()
		if err := g.finish(); err == nil {
			t.Error("failure not reported")
		}
		g.close()
	}
}
