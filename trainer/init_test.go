package trainer

import (
	"slices"
	"testing"
)

// TestInitIgnoresSyntheticCount: WriteInit makes synthetic data one batch
// long, which is only right while the data's count never reaches the
// initial parameters: a CNN's, drawn from one seed, must be the same bits
// from 64 synthetic samples as from 5,000 (the shape the same).
func TestInitIgnoresSyntheticCount(t *testing.T) {
	var got [2][]float32
	for i, n := range []int{64, 5000} {
		c := valid()
		c.Model.Kind = "cnn"
		c.Data.Dir, c.Data.SyntheticShape, c.Data.SyntheticSamples = "synthetic", "1x28x28", n
		s, err := NewSession(nil, c, Options{Local: true})
		if err != nil {
			t.Fatalf("--synthetic-samples %d: %v", n, err)
		}
		s.Model.Init(c.Optim.Seed)
		got[i] = append(slices.Clone(s.Model.Params.Data), s.Model.Params.Buffers...)
	}
	if len(got[0]) == 0 || !slices.Equal(got[0], got[1]) {
		t.Errorf("initial parameters differ between 64 and 5,000 synthetic samples (%d and %d values)", len(got[0]), len(got[1]))
	}
}
