package plan

import (
	"testing"
	"train/internal/near"
)

var net = Network{LatencyS: 1e-6, BytesPerS: 1e9, ReduceBytesS: 1e10}

// approx is a equal to the expected b within rounding.
func approx(a, b float64) bool { return near.Close(b, a, 1e-9, 1e-12) }

func TestFormulas(t *testing.T) {
	n := 1e6
	// 2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma at p = 4.
	if got, want := Ring(net, 4, n), 6e-6+1.5e-3+7.5e-5; !approx(got, want) {
		t.Errorf("Ring = %g, want %g", got, want)
	}
	// lg 4 = 2 rounds of alpha + n beta + n gamma.
	if got, want := RecursiveDoubling(net, 4, n), 2*(1e-6+1e-3+1e-4); !approx(got, want) {
		t.Errorf("RecursiveDoubling = %g, want %g", got, want)
	}
	// 2 lg p alpha and the ring's bandwidth terms.
	if got, want := Rabenseifner(net, 4, n), 4e-6+1.5e-3+7.5e-5; !approx(got, want) {
		t.Errorf("Rabenseifner = %g, want %g", got, want)
	}
	// One server, 3 workers: the server's link carries 3n each way.
	if got, want := PSSync(net, 3, 1, n), 6e-6+6e-3+3e-4; !approx(got, want) {
		t.Errorf("PSSync = %g, want %g", got, want)
	}
	for _, f := range []func(Network, int, float64) float64{Ring, RecursiveDoubling, Rabenseifner, PSColocated} {
		if f(net, 1, n) != 0 {
			t.Error("one node communicates")
		}
	}
}

// The ring's bandwidth term tends to 2 n beta whatever p (the argument of
// Baidu and Horovod); a single parameter server's grows with the workers.
func TestScaling(t *testing.T) {
	n := 1e8
	if r := Ring(Network{BytesPerS: 1e9, ReduceBytesS: 1e30}, 512, n); r > 2*n/1e9 || r < 1.99*n/1e9 {
		t.Errorf("ring at 512 nodes: %g s, want just under 2n/bandwidth = %g", r, 2*n/1e9)
	}
	job := Job{ParamBytes: n, ComputeS: 0.1, BatchPerRank: 32, Servers: 1, SyncEvery: 8}
	prev := map[string]float64{}
	for _, p := range []int{2, 8, 64, 512} {
		for _, pr := range Predict(net, job, p) {
			if pr.Efficiency > 1 || pr.Efficiency <= 0 || pr.StepS < job.ComputeS {
				t.Errorf("%d nodes %s: efficiency %g, step %g", p, pr.Strategy, pr.Efficiency, pr.StepS)
			}
			if e, ok := prev[pr.Strategy]; ok && pr.Efficiency > e+1e-12 {
				t.Errorf("%s: efficiency rose from %g to %g at %d nodes", pr.Strategy, e, pr.Efficiency, p)
			}
			prev[pr.Strategy] = pr.Efficiency
		}
	}
	at := func(p int, name string) Prediction {
		for _, pr := range Predict(net, job, p) {
			if pr.Strategy == name {
				return pr
			}
		}
		t.Fatalf("no %s at %d nodes", name, p)
		return Prediction{}
	}
	if at(512, "ps-sync").StepS < 10*at(512, "ring").StepS {
		t.Error("one parameter server should be far slower than the ring at 512 nodes")
	}
	if at(64, "local-sgd").CommS >= at(64, "ring").CommS {
		t.Error("local-sgd every 8 steps should communicate less than the ring every step")
	}
}

// With 2 ranks on each of 2 nodes, the ring is the 4-rank ring (its
// crossing edges carry what a rank sends), hier is two memory passes plus
// the 2-node ring, and the parameter servers are not predicted.
func TestRanksPerNode(t *testing.T) {
	n := 1e6
	job := Job{ParamBytes: n, ComputeS: 1e-3, BatchPerRank: 8, Servers: 1, SyncEvery: 1, RanksPerNode: 2}
	got := map[string]Prediction{}
	for _, p := range Predict(net, job, 2) {
		got[p.Strategy] = p
	}
	if r := got["ring"]; !approx(r.CommS, Ring(net, 4, n)) || r.Workers != 4 {
		t.Errorf("ring: %+v, want the 4-rank ring's %g on 4 workers", r, Ring(net, 4, n))
	}
	if h := got["hier"]; !approx(h.CommS, 2*n/net.ReduceBytesS+Ring(net, 2, n)) { // no IntraBytesS: the reduction speed
		t.Errorf("hier: %+v", h)
	}
	if got["hier"].CommS >= got["ring"].CommS {
		t.Errorf("hier %g not below ring %g on a bandwidth-bound link", got["hier"].CommS, got["ring"].CommS)
	}
	// OpenMPI's recursive halving with node-local partners first: the link
	// carries what hier's leaders send, less than the ring's 1.5 n.
	if got["mpi"].CommS >= got["ring"].CommS {
		t.Errorf("mpi %g not below ring %g with 2 ranks per node", got["mpi"].CommS, got["ring"].CommS)
	}
	if _, ok := got["ps-sync"]; ok {
		t.Error("parameter servers predicted with 2 ranks per node")
	}
}

// TestCompressedWire: a 16-bit wire halves the ring's link term only
// (latency and float32 additions stay), adds an encode and a decode per
// byte sent and received, and reaches ring and hier but no other row.
func TestCompressedWire(t *testing.T) {
	net := Network{LatencyS: 1e-4, BytesPerS: 1e8, ReduceBytesS: 1e10, IntraBytesS: 5e9}
	const p, n = 4, 8e6
	f := 0.75
	want := 6*net.LatencyS + 2*f*n*0.5/net.BytesPerS + f*n/net.ReduceBytesS
	if got := RingWire(net, p, n, 0.5); !near.Close(want, got, 0, 1e-12) {
		t.Errorf("RingWire = %v, want %v", got, want)
	}
	if got := RingWire(net, p, n, 1); got != Ring(net, p, n) {
		t.Errorf("RingWire with a float32 wire = %v, Ring %v", got, Ring(net, p, n))
	}
	net.ConvertBytesS = 6e9
	if got := RingWire(net, p, n, 0.5); !near.Close(want+2*f*n/6e9, got, 0, 1e-12) {
		t.Errorf("RingWire with conversion = %v", got)
	}
	job := Job{ParamBytes: n, ComputeS: 1e-3, BatchPerRank: 64, RanksPerNode: 2, SyncEvery: 8}
	plain := Predict(net, job, 2)
	job.Wire = 0.5
	comp := Predict(net, job, 2)
	for i := range plain {
		s := plain[i].Strategy
		switch {
		case s == "ring" || s == "hier":
			if comp[i].StepS >= plain[i].StepS {
				t.Errorf("%s: compressed %v not faster than %v", s, comp[i].StepS, plain[i].StepS)
			}
		case comp[i].StepS != plain[i].StepS:
			t.Errorf("%s changed with compression: %v vs %v", s, comp[i].StepS, plain[i].StepS)
		}
	}
}
