package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLayerNormParSameBits: LayerNorm's forward and backward and the bias
// sums, cut across the pool's threads (rows for what is per row, columns
// for the parameter sums), give the bits of the one-thread loops they
// replaced (lnSerial), at 1, 3 and 16 threads: y, mean and rstd; dx set,
// added to, or not asked for; dw and db added to values already there.
// The reference is those loops as they ran before the passes, not a copy
// of the passes.
func TestLayerNormParSameBits(t *testing.T) {
	defer SetThreads(1)
	rng := rand.New(rand.NewPCG(50, 51))
	for _, threads := range []int{1, 3, 16} {
		SetThreads(threads)
		for _, sh := range []struct{ rows, c int }{{1, 384}, {7, 5}, {1027, 384}, {64, 1536}, {33, 17}} {
			rows, c := sh.rows, sh.c
			x, dy := normals(rng, rows*c), normals(rng, rows*c)
			w, b := normals(rng, c), normals(rng, c)
			dw0, db0, dx0 := normals(rng, c), normals(rng, c), normals(rng, rows*c)
			type out struct{ y, mean, rstd, dx, dw, db, cs []float32 }
			run := func(serial bool, add, noDx bool) out {
				lnSerial = serial
				defer func() { lnSerial = false }()
				o := out{y: make([]float32, rows*c), mean: make([]float32, rows), rstd: make([]float32, rows),
					dw: slices.Clone(dw0), db: slices.Clone(db0), cs: slices.Clone(db0)}
				layerNorm(o.y, o.mean, o.rstd, x, w, b, rows, c)
				if !noDx {
					o.dx = slices.Clone(dx0)
				}
				layerNormBackward(o.dx, o.dw, o.db, dy, x, w, o.mean, o.rstd, rows, c, add)
				colSum(o.cs, dy, rows, c)
				return o
			}
			for _, mode := range []struct{ add, noDx bool }{{false, false}, {true, false}, {false, true}} {
				want, got := run(true, mode.add, mode.noDx), run(false, mode.add, mode.noDx)
				name := fmt.Sprintf("%d threads, %dx%d, add %v, no dx %v", threads, rows, c, mode.add, mode.noDx)
				for _, v := range []struct {
					what      string
					got, want []float32
				}{{"y", got.y, want.y}, {"mean", got.mean, want.mean}, {"rstd", got.rstd, want.rstd}, {"dx", got.dx, want.dx},
					{"dw", got.dw, want.dw}, {"db", got.db, want.db}, {"column sums", got.cs, want.cs}} {
					if len(v.got) != len(v.want) {
						t.Fatalf("%s: %s has %d values, want %d", name, v.what, len(v.got), len(v.want))
					}
					if i := firstDiff(v.got, v.want); i >= 0 {
						t.Errorf("%s: %s[%d] = %v cut across the threads, %v on one", name, v.what, i, v.got[i], v.want[i])
					}
				}
			}
		}
	}
}
