package trainer

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
)

// syncBuf is a writer the push goroutine and the test share.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testPushHook(url string, timeout time.Duration, errw *syncBuf) *pushHook {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "train_test_total", Help: "test"}))
	p := push.New(url, "train").Gatherer(reg).Client(&http.Client{Timeout: timeout})
	return &pushHook{p: p, url: url, every: 1, errw: errw}
}

// TestPushNeverHoldsTraining: a gateway that takes the connection and
// does not answer costs the steps nothing (one push in flight, the
// others skipped) and the end at most the client's timeout, with one
// warning line. Before, each step's push waited on the gateway with no
// timeout: the job hung, and SIGTERM with it.
func TestPushNeverHoldsTraining(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	var errw syncBuf
	h := testPushHook(srv.URL, 300*time.Millisecond, &errw)
	start := time.Now()
	for step := 1; step <= 50; step++ {
		h.Step(&StepEvent{Step: step})
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("50 steps with a silent gateway took %v", d)
	}
	h.End(&EndEvent{})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the end waited %v for a silent gateway (client timeout 300 ms)", d)
	}
	if n := requests.Load(); n < 1 || n > 3 {
		t.Errorf("%d pushes reached the gateway, want the first step's and the end's (and one more at most)", n)
	}
	out := errw.String()
	if c := strings.Count(out, "--pushgateway "+srv.URL+": "); c != 2 || !strings.Contains(out, "training goes on") || !strings.Contains(out, "the final one included, failed") {
		t.Errorf("want the first failure and the end's summary, got:\n%s", out)
	}
}

// TestPushFailureOnce: a gateway that fails each push is reported once,
// and again when it answers.
func TestPushFailureOnce(t *testing.T) {
	var ok atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	var errw syncBuf
	h := testPushHook(srv.URL, time.Second, &errw)
	for step := 1; step <= 5; step++ {
		h.Step(&StepEvent{Step: step})
		h.wait()
	}
	ok.Store(true)
	h.Step(&StepEvent{Step: 6})
	h.wait()
	h.End(&EndEvent{})
	out := errw.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "500") || !strings.Contains(lines[1], "pushing again after 5 failed push(es)") {
		t.Errorf("want one failure line and one recovery line, got:\n%s", out)
	}
}
