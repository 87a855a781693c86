package optim

import "testing"

// TestStateFloats: what StateFloats says each optimizer keeps per
// parameter is what New allocates.
func TestStateFloats(t *testing.T) {
	for _, c := range []Config{{Name: "sgd"}, {Name: "sgd", Momentum: 0.9}, {Name: "adam", Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{Name: "adamw", Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}} {
		const n = 10
		o, err := New(c, n)
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, v := range o.State() {
			held += len(v)
		}
		if held != n*StateFloats(c) {
			t.Errorf("%s momentum %v: New keeps %d floats for %d parameters, StateFloats says %d each", c.Name, c.Momentum, held, n, StateFloats(c))
		}
	}
}
