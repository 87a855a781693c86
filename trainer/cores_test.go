package trainer

import (
	"runtime"
	"testing"
)

func TestCoresPerRank(t *testing.T) {
	total := onlineCPUs()
	if total < 1 {
		t.Fatalf("onlineCPUs = %d", total)
	}
	avail := runtime.NumCPU()
	for _, local := range []int{1, 2, 3, 64} {
		got := coresPerRank(local)
		want := max(1, total/local)
		if avail < total {
			want = avail // bound by the launcher
		}
		if got != want {
			t.Errorf("coresPerRank(%d) = %d, want %d (%d online, %d available)", local, got, want, total, avail)
		}
	}
}
