package optim

import (
	"testing"
	"train/internal/near"
)

// TestSGDMatchesPyTorch checks three steps against values worked by hand
// from torch.optim.SGD's update rule (momentum 0.9, weight decay 0.1,
// lr 0.5) on one parameter starting at 1 with gradients 1, 2, -1.
func TestSGDMatchesPyTorch(t *testing.T) {
	s := NewSGD(1, 0.9, 0.1)
	p := []float32{1}
	// step 1: g = 1 + 0.1*1 = 1.1; buf = 1.1; p = 1 - 0.55 = 0.45
	// step 2: g = 2 + 0.045 = 2.045; buf = 0.99 + 2.045 = 3.035; p = 0.45 - 1.5175 = -1.0675
	// step 3: g = -1 - 0.10675 = -1.10675; buf = 2.7315 - 1.10675 = 1.62475; p = -1.0675 - 0.812375 = -1.879875
	want := []float32{0.45, -1.0675, -1.879875}
	for i, g := range []float32{1, 2, -1} {
		s.Step(p, []float32{g}, 0.5, i+1)
		if !near.Close(float64(want[i]), float64(p[0]), 0, 1e-6) {
			t.Fatalf("step %d: param %v, want %v", i+1, p[0], want[i])
		}
	}
	if got := s.State()["momentum_buffer"][0]; !near.Close(1.62475, float64(got), 0, 1e-6) {
		t.Errorf("momentum buffer %v", got)
	}
	plain := NewSGD(2, 0, 0)
	q := []float32{1, 2}
	plain.Step(q, []float32{1, -1}, 0.1, 1)
	if q[0] != 0.9 || q[1] != 2.1 || plain.State() != nil {
		t.Errorf("plain SGD gave %v", q)
	}
}

// TestNesterov: three steps of torch.optim.SGD(nesterov=True, momentum
// 0.9, lr 0.5) on a parameter starting at 1 with gradients 1, 2, -1.
func TestNesterov(t *testing.T) {
	s := NewSGD(1, 0.9, 0)
	s.Nesterov = true
	p := []float32{1}
	// buf 1 -> p -= 0.5*(1+0.9) = 0.05; buf 2.9 -> p -= 0.5*(2+2.61) = -2.255;
	// buf 1.61 -> p -= 0.5*(-1+1.449) = -2.4795
	for i, g := range []float32{1, 2, -1} {
		s.Step(p, []float32{g}, 0.5, i+1)
	}
	if !near.Close(-2.4795, float64(p[0]), 0, 1e-5) {
		t.Errorf("nesterov gave %v, want -2.4795", p[0])
	}
}
