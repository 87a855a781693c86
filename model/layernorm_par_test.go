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

// TestEmbedParSameBits: the embedding's forward (by rows) and backward
// (by columns) across 1, 3 and 16 threads give the bits of the formula
// written as plain loops here: y[r] = wte[id] + wpe[r mod T]; and each of
// dy's rows added into its token's and position's gradient rows in row
// order, onto values already there, with tokens repeated (a small
// vocabulary) so that the order matters.
func TestEmbedParSameBits(t *testing.T) {
	defer SetThreads(1)
	rng := rand.New(rand.NewPCG(52, 53))
	for _, threads := range []int{1, 3, 16} {
		SetThreads(threads)
		for _, sh := range []struct{ rows, T, c, vocab int }{{1024, 256, 384, 50}, {7, 3, 5, 4}, {33, 33, 17, 2}, {40, 8, 100, 3}} {
			rows, T, c, vocab := sh.rows, sh.T, sh.c, sh.vocab
			ids := make([]float32, rows)
			for i := range ids {
				ids[i] = float32(rng.IntN(vocab))
			}
			wte, wpe, dy := normals(rng, vocab*c), normals(rng, T*c), normals(rng, rows*c)
			dwte0, dwpe0 := normals(rng, vocab*c), normals(rng, T*c)
			name := fmt.Sprintf("%d threads, %d rows of %d, T %d, vocabulary %d", threads, rows, c, T, vocab)

			y, want := make([]float32, rows*c), make([]float32, rows*c)
			for r := range rows {
				for j := range c {
					want[r*c+j] = wte[int(ids[r])*c+j] + wpe[(r%T)*c+j]
				}
			}
			embed(y, ids, wte, wpe, rows, T, c)
			if i := firstDiff(y, want); i >= 0 {
				t.Errorf("%s: y[%d] = %v, want %v", name, i, y[i], want[i])
			}

			dwte, dwpe := slices.Clone(dwte0), slices.Clone(dwpe0)
			wantTE, wantPE := slices.Clone(dwte0), slices.Clone(dwpe0)
			for r := range rows {
				for j := range c {
					wantTE[int(ids[r])*c+j] += dy[r*c+j]
					wantPE[(r%T)*c+j] += dy[r*c+j]
				}
			}
			embedBackward(dwte, dwpe, dy, ids, rows, T, c)
			if i := firstDiff(dwte, wantTE); i >= 0 {
				t.Errorf("%s: dwte[%d] = %v, want %v", name, i, dwte[i], wantTE[i])
			}
			if i := firstDiff(dwpe, wantPE); i >= 0 {
				t.Errorf("%s: dwpe[%d] = %v, want %v", name, i, dwpe[i], wantPE[i])
			}
		}
	}
}
