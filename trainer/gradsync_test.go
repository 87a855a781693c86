package trainer

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"train/model"
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

// fakeReducer records the buckets it reduces, and fails or panics when
// told to.
type fakeReducer struct {
	reduced []int // bucket lengths, in order
	marked  []int
	started chan int
	fail    func(b bucket) error
}

func (f *fakeReducer) use([]bucket) error { return nil }
func (f *fakeReducer) mark(b bucket)      { f.marked = append(f.marked, b.hi-b.lo) }
func (f *fakeReducer) whole() bool        { return false }
func (f *fakeReducer) describe() string   { return "fake" }
func (f *fakeReducer) close()             {}
func (f *fakeReducer) reduce(b bucket) error {
	if f.fail != nil {
		return f.fail(b)
	}
	f.reduced = append(f.reduced, b.hi-b.lo)
	f.started <- b.hi - b.lo
	return nil
}

// TestGradSyncOverlap drives gradSync in one process with a fake reducer:
// buckets go to the communication goroutine as soon as backward reports
// them final, in backward order, each marked as it is handed over;
// without overlap they go after backward. (The real allreduces under
// mpirun are in the end-to-end tests.)
func TestGradSyncOverlap(t *testing.T) {
	bs := []bucket{{410, 420}, {110, 410}, {0, 110}}
	for _, overlap := range []bool{true, false} {
		f := &fakeReducer{started: make(chan int, 3)}
		g, err := newGradSync(f, bs, overlap)
		if err != nil {
			t.Fatal(err)
		}
		g.begin()
		g.ready(415) // not yet a whole bucket
		g.ready(410) // bucket {410,420} final
		if overlap {
			if n := <-f.started; n != 10 {
				t.Errorf("first bucket reduced has %d floats, want 10", n)
			}
		} else if len(f.started) != 0 {
			t.Error("reduced during backward without overlap")
		}
		g.ready(0)
		if err := g.finish(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.reduced, []int{10, 300, 110}) {
			t.Errorf("overlap=%v: reduced %v", overlap, f.reduced)
		}
		if want := map[bool][]int{true: {10, 300, 110}, false: nil}[overlap]; !slices.Equal(f.marked, want) {
			t.Errorf("overlap=%v: marked %v, want %v", overlap, f.marked, want)
		}
		g.close()
	}
	// A failing or panicking reducer is an error from finish.
	for _, bad := range []func(bucket) error{
		func(bucket) error { return errors.New("link down") },
		func(bucket) error { panic("oops") },
	} {
		g, _ := newGradSync(&fakeReducer{fail: bad}, bs, true)
		g.begin()
		if err := g.finish(); err == nil {
			t.Error("failure not reported")
		}
		g.close()
	}
}
