package mpi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"train/mpi"
	"train/mpi/mpitest"
)

// TestShape: the rank order written out by hand for a 2x2x2 grid
// (Megatron-LM's: tensor fastest, then data, then pipeline), Rank as
// Coord's inverse on other shapes, and the refusals.
func TestShape(t *testing.T) {
	s, err := mpi.NewShape(8, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if s != (mpi.Shape{D: 2, P: 2, T: 2}) {
		t.Fatalf("shape %+v, want D 2 P 2 T 2", s)
	}
	want := []mpi.Coord{ // {D, P, T}
		{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1},
		{0, 1, 0}, {0, 1, 1}, {1, 1, 0}, {1, 1, 1},
	}
	for r, c := range want {
		if got := s.Coord(r); got != c {
			t.Errorf("rank %d at %+v, want %+v", r, got, c)
		}
	}
	for _, sh := range []mpi.Shape{{1, 1, 1}, {3, 1, 1}, {1, 4, 1}, {1, 1, 4}, {2, 3, 2}, {3, 2, 5}} {
		seen := map[mpi.Coord]bool{}
		for r := range sh.Size() {
			c := sh.Coord(r)
			if c.D >= sh.D || c.P >= sh.P || c.T >= sh.T || seen[c] || sh.Rank(c) != r {
				t.Errorf("%+v: rank %d at %+v (back to %d)", sh, r, c, sh.Rank(c))
			}
			seen[c] = true
		}
	}
	for _, bad := range []struct {
		np, p, t int
		msg      string
	}{
		{6, 4, 1, "6 rank(s) do not divide into --pipeline 4 x --tensor-parallel 1 = 4"},
		{4, 2, 3, "--pipeline 2 x --tensor-parallel 3"},
		{4, 0, 1, "--pipeline 0"},
		{4, 1, 0, "--tensor-parallel 0"},
	} {
		if _, err := mpi.NewShape(bad.np, bad.p, bad.t); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("np %d, P %d, T %d: %v, want %q", bad.np, bad.p, bad.t, err, bad.msg)
		}
	}
}

// TestGrid: under mpirun with 4 ranks, every grid's three communicators
// hold exactly the ranks that share this rank's other two coordinates,
// ranked by the third: each sums the world ranks of its members, and
// checks its size and its rank.
func TestGrid(t *testing.T) {
	if !mpitest.Launch(t, 4, 60*time.Second) {
		return
	}
	w := world(t)
	for _, pt := range [][2]int{{1, 1}, {2, 1}, {4, 1}, {1, 2}, {1, 4}, {2, 2}} {
		s, err := mpi.NewShape(w.Size(), pt[0], pt[1])
		if err != nil {
			t.Fatal(err)
		}
		g, err := mpi.NewGrid(w, s)
		if err != nil {
			t.Fatal(err)
		}
		me := s.Coord(w.Rank())
		for _, ax := range []struct {
			name      string
			comm      *mpi.World
			size, pos int
			same      func(c mpi.Coord) bool
		}{
			{"data", g.Data, s.D, me.D, func(c mpi.Coord) bool { return c.P == me.P && c.T == me.T }},
			{"pipe", g.Pipe, s.P, me.P, func(c mpi.Coord) bool { return c.D == me.D && c.T == me.T }},
			{"tensor", g.Tensor, s.T, me.T, func(c mpi.Coord) bool { return c.D == me.D && c.P == me.P }},
		} {
			what := fmt.Sprintf("grid %+v, rank %d at %+v, %s", s, w.Rank(), me, ax.name)
			if ax.comm.Size() != ax.size || ax.comm.Rank() != ax.pos {
				t.Errorf("%s: rank %d of %d, want %d of %d", what, ax.comm.Rank(), ax.comm.Size(), ax.pos, ax.size)
			}
			want := 0.0
			for r := range w.Size() {
				if ax.same(s.Coord(r)) {
					want += float64(r)
				}
			}
			got := []float64{float64(w.Rank())}
			if err := ax.comm.AllreduceFloat64(got, mpi.Sum); err != nil || got[0] != want {
				t.Errorf("%s: members' ranks sum to %v (%v), want %v", what, got[0], err, want)
			}
		}
		if err := g.Free(); err != nil {
			t.Fatal(err)
		}
	}
}
