package ps

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"train/internal/near"
	"train/mpi"
	"train/mpi/mpitest"
	"train/optim"
)

func TestShards(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		want [][2]int
	}{
		{10, 1, [][2]int{{0, 10}}},
		{10, 3, [][2]int{{0, 3}, {3, 6}, {6, 10}}},
		{2, 3, [][2]int{{0, 0}, {0, 1}, {1, 2}}},
	} {
		if got := Shards(tc.n, tc.k); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Shards(%d, %d) = %v, want %v", tc.n, tc.k, got, tc.want)
		}
	}
}

// world starts MPI in a rank launched by mpitest (mpitest.World: finalized
// after a pass, aborted after a failure).
func world(t *testing.T) *mpi.World {
	t.Helper()
	return mpitest.World(t)
}

const n = 10 // parameters in the tests' model

// start is the parameters every rank begins with: p[i] = i.
func start() []float32 {
	p := make([]float32, n)
	for i := range p {
		p[i] = float32(i)
	}
	return p
}

// grad is worker k's gradient at update t: (k+1)(i+1)/t.
func grad(k, t int) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = float32((k+1)*(i+1)) / float32(t)
	}
	return g
}

// server serves shard s of start() with SGD (momentum 0.9, as package
// optim computes it) and returns its stats.
func server(t *testing.T, w *mpi.World, workers, servers, s int, async bool, staleness int, poll bool) Stats {
	t.Helper()
	sh := Shards(n, servers)[s]
	opt, err := optim.New(optim.Config{Name: "sgd", Momentum: 0.9}, sh[1]-sh[0])
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{W: w, Workers: workers, Params: start()[sh[0]:sh[1]], Opt: opt, Async: async, Staleness: staleness, Poll: poll}
	st, err := srv.Serve()
	if err != nil {
		t.Fatalf("server %d: %v", s, err)
	}
	return st
}

// sgdSync is the reference for synchronous steps: the workers' mean
// gradient, momentum 0.9 (buf = 0.9 buf + g; p -= lr buf), in float64.
func sgdSync(workers, steps int, lr float64) (p, buf []float64) {
	p, buf = make([]float64, n), make([]float64, n)
	for i := range p {
		p[i] = float64(i)
	}
	for t := 1; t <= steps; t++ {
		for i := range p {
			var g float64
			for k := range workers {
				g += float64((k+1)*(i+1)) / float64(t)
			}
			buf[i] = 0.9*buf[i] + g/float64(workers)
			p[i] -= lr * buf[i]
		}
	}
	return p, buf
}

func check(t *testing.T, what string, want []float64, got []float32) {
	t.Helper()
	w := make([]float32, len(want))
	for i, v := range want {
		w[i] = float32(v)
	}
	if err := near.Check(w, got, 1e-6); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// TestSync: two workers with one and with two synchronous servers; after
// each of 3 updates every worker holds the parameters of SGD with momentum
// on the mean gradient, and rank 0's State request returns parameters and
// momentum as that formula has them.
func TestSync(t *testing.T) {
	for _, servers := range []int{1, 2} {
		np := 2 + servers
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			if !mpitest.Launch(t, np, time.Minute) {
				return
			}
			w := world(t)
			const workers, steps, lr = 2, 3, 0.1
			if w.Rank() >= workers {
				if st := server(t, w, workers, servers, w.Rank()-workers, false, 0, false); st.Updates != steps {
					t.Errorf("server: %d updates, want %d", st.Updates, steps)
				}
				return
			}
			c := NewClient(w, Shards(n, servers), workers, false)
			params := start()
			for u := 1; u <= steps; u++ {
				if err := c.Step(params, grad(w.Rank(), u), lr, u, true, true); err != nil {
					t.Fatal(err)
				}
				want, _ := sgdSync(workers, u, lr)
				check(t, fmt.Sprintf("worker %d after update %d", w.Rank(), u), want, params)
			}
			if w.Rank() == 0 {
				p := make([]float32, n)
				state := map[string][]float32{"momentum_buffer": make([]float32, n)}
				if err := c.FetchState(p, state); err != nil {
					t.Fatal(err)
				}
				want, buf := sgdSync(workers, steps, lr)
				check(t, "State: parameters", want, p)
				check(t, "State: momentum", buf, state["momentum_buffer"])
			}
			if err := c.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAsync: three workers at uneven paces push 40 gradients each to one
// asynchronous server with staleness bound 1. The server applies all 120
// (scaled by 1/3), no push is staler than the bound allows,
// (W-1)(2S+1) = 6, and after a barrier every worker fetches the same
// parameters: with plain SGD, the start minus lr/3 times the sum of every
// gradient, whatever the order.
func TestAsync(t *testing.T) {
	if !mpitest.Launch(t, 4, time.Minute) {
		return
	}
	w := world(t)
	const workers, steps, lr = 3, 40, 0.01
	sub, err := w.Split(w.Rank()/workers, w.Rank()) // the workers' own communicator (collective: every rank)
	if err != nil {
		t.Fatal(err)
	}
	if w.Rank() == workers {
		sh := Shards(n, 1)[0]
		opt, _ := optim.New(optim.Config{Name: "sgd"}, sh[1])
		st, err := (&Server{W: w, Workers: workers, Params: start(), Opt: opt, Async: true, Staleness: 1}).Serve()
		if err != nil {
			t.Fatal(err)
		}
		if st.Updates != workers*steps || st.Pushes != workers*steps || st.StaleMax > 6 {
			t.Errorf("server: %+v, want %d updates and pushes, staleness at most 6", st, workers*steps)
		}
		t.Logf("staleness max %d, mean %.2f", st.StaleMax, float64(st.StaleSum)/float64(st.Pushes))
		w.Barrier()
		return
	}
	c := NewClient(w, Shards(n, 1), workers, false)
	params := start()
	rng := rand.New(rand.NewPCG(uint64(w.Rank()), 1))
	for u := 1; u <= steps; u++ {
		time.Sleep(time.Duration(rng.IntN(2000)*(w.Rank()+1)) * time.Microsecond)
		if err := c.Step(params, grad(w.Rank(), u), lr, u, true, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Barrier(); err != nil { // every push is in
		t.Fatal(err)
	}
	if err := c.Fetch(params); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, n)
	for i := range want {
		want[i] = float64(i)
		for k := range workers {
			for u := 1; u <= steps; u++ {
				want[i] -= lr / workers * float64((k+1)*(i+1)) / float64(u)
			}
		}
	}
	w32 := make([]float32, n)
	for i, v := range want {
		w32[i] = float32(v)
	}
	if err := near.Check(w32, params, 1e-5); err != nil {
		t.Errorf("worker %d: fetched parameters: %v", w.Rank(), err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	w.Barrier()
}

// TestAsyncTwoServers: three workers, two asynchronous servers with
// staleness bound 1, shards far past MPI's eager limit, one worker slower
// than the others: 200 updates each complete (the exchange a worker makes
// posts its receives before it pushes; see the package documentation).
func TestAsyncTwoServers(t *testing.T) {
	if !mpitest.Launch(t, 5, 2*time.Minute) {
		return
	}
	w := world(t)
	const workers, steps, big = 3, 200, 1 << 18
	if w.Rank() >= workers {
		sh := Shards(big, 2)[w.Rank()-workers]
		opt, _ := optim.New(optim.Config{Name: "sgd"}, sh[1]-sh[0])
		st, err := (&Server{W: w, Workers: workers, Params: make([]float32, sh[1]-sh[0]), Opt: opt, Async: true, Staleness: 1}).Serve()
		if err != nil {
			t.Fatal(err)
		}
		if st.Updates != workers*steps {
			t.Errorf("server %d: %d updates, want %d", w.Rank(), st.Updates, workers*steps)
		}
		return
	}
	c := NewClient(w, Shards(big, 2), workers, false)
	params, g := make([]float32, big), make([]float32, big)
	for u := 1; u <= steps; u++ {
		if w.Rank() == 2 {
			time.Sleep(time.Millisecond)
		}
		if err := c.Step(params, g, 0.01, u, true, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestColocated: two ranks that are both workers and, in a goroutine each
// on a duplicated communicator, the two synchronous servers (polling),
// reach the same parameters as separate servers would.
func TestColocated(t *testing.T) {
	if !mpitest.Launch(t, 2, time.Minute) {
		return
	}
	w := world(t)
	pw, err := w.Dup()
	if err != nil {
		t.Fatal(err)
	}
	const steps, lr = 3, 0.1
	done := make(chan Stats, 1)
	go func() { done <- server(t, pw, 2, 2, w.Rank(), false, 0, true) }()
	c := NewClient(pw, Shards(n, 2), 2, true)
	params := start()
	for u := 1; u <= steps; u++ {
		if err := c.Step(params, grad(w.Rank(), u), lr, u, true, true); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := sgdSync(2, steps, lr)
	check(t, fmt.Sprintf("worker %d", w.Rank()), want, params)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if st := <-done; st.Updates != steps {
		t.Errorf("colocated server %d: %d updates, want %d", w.Rank(), st.Updates, steps)
	}
}
