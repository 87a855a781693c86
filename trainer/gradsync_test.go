package trainer

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

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

// boundedFake holds each bucket until the test releases it, and counts
// the buckets handed over and not yet released.
type boundedFake struct {
	fakeReducer
	release  chan struct{}
	inFlight atomic.Int32
	most     atomic.Int32
}

func (f *boundedFake) inflight() int { return 1 }
func (f *boundedFake) mark(bucket) {
	n := f.inFlight.Add(1)
	if n > f.most.Load() {
		f.most.Store(n)
	}
}
func (f *boundedFake) reduce(bucket) error {
	<-f.release
	f.inFlight.Add(-1)
	return nil
}

// TestGradSyncBound: with a reducer that frees what it reduces (ZeRO
// from stage 2), backward's ready waits while a bucket is in flight
// rather than handing over the next, so at most one is ever pending; a
// failure while waiting still reaches finish.
func TestGradSyncBound(t *testing.T) {
	bs := []bucket{{30, 40}, {20, 30}, {10, 20}, {0, 10}}
	f := &boundedFake{release: make(chan struct{})}
	g, err := newGradSync(f, bs, true)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	g.begin()
	returned := make(chan struct{})
	go func() {
		g.ready(30)
		g.ready(20) // must wait for {30,40}
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("ready handed a second bucket over while the first was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	f.release <- struct{}{}
	<-returned
	go func() {
		for range 3 {
			f.release <- struct{}{}
		}
	}()
	if err := g.finish(); err != nil {
		t.Fatal(err)
	}
	if m := f.most.Load(); m != 1 {
		t.Errorf("%d buckets in flight at once, want at most 1", m)
	}

	bad := &boundedFake{release: make(chan struct{})}
	bad.fail = func(bucket) error { return errors.New("link down") }
	g2, _ := newGradSync(&failBounded{bad}, bs, true)
	defer g2.close()
	g2.begin()
	g2.ready(20)
	if err := g2.finish(); err == nil {
		t.Error("failure while bounded not reported")
	}
}

// failBounded is a bounded reducer whose every bucket fails.
type failBounded struct{ *boundedFake }

func (f *failBounded) reduce(b bucket) error { return f.fail(b) }
