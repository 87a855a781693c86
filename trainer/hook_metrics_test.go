package trainer

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"train/flightrec"
	"train/internal/near"
	"train/timeline"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricValues: the metrics hook turns two steps and two reduced
// buckets into the counters, gauges and histograms the README lists.
func TestMetricValues(t *testing.T) {
	h := newMetricsHookOn(newMetrics(), "ring")
	m := h.m
	st := &stepTimes{data: time.Millisecond, forward: 2 * time.Millisecond, backward: 3 * time.Millisecond,
		wait: 4 * time.Millisecond, optimize: 5 * time.Millisecond}
	h.Step(&StepEvent{Times: st, Samples: 64, LR: 0.1})
	h.Step(&StepEvent{Times: st, Samples: 64, LR: 0.05})
	if got := testutil.ToFloat64(m.samples); got != 128 {
		t.Errorf("samples %v, want 128", got)
	}
	if got := testutil.ToFloat64(m.steps); got != 2 {
		t.Errorf("steps %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.lr); got != 0.05 {
		t.Errorf("learning rate %v, want the last, 0.05", got)
	}
	// The step histogram: two observations of 15 ms.
	want := `
# HELP train_step_duration_seconds Wall time of a training step on this rank.
# TYPE train_step_duration_seconds histogram
train_step_duration_seconds_bucket{le="0.001"} 0
train_step_duration_seconds_bucket{le="0.002"} 0
train_step_duration_seconds_bucket{le="0.004"} 0
train_step_duration_seconds_bucket{le="0.008"} 0
train_step_duration_seconds_bucket{le="0.016"} 2
train_step_duration_seconds_bucket{le="0.032"} 2
train_step_duration_seconds_bucket{le="0.064"} 2
train_step_duration_seconds_bucket{le="0.128"} 2
train_step_duration_seconds_bucket{le="0.256"} 2
train_step_duration_seconds_bucket{le="0.512"} 2
train_step_duration_seconds_bucket{le="1.024"} 2
train_step_duration_seconds_bucket{le="2.048"} 2
train_step_duration_seconds_bucket{le="4.096"} 2
train_step_duration_seconds_bucket{le="8.192"} 2
train_step_duration_seconds_bucket{le="16.384"} 2
train_step_duration_seconds_bucket{le="32.768"} 2
train_step_duration_seconds_bucket{le="+Inf"} 2
train_step_duration_seconds_sum 0.03
train_step_duration_seconds_count 2
`
	if err := testutil.CollectAndCompare(m.stepSeconds, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// Five phases, two observations each.
	if n := testutil.CollectAndCount(m.phaseSeconds); n != 5 {
		t.Errorf("%d phase series, want 5", n)
	}
	// Buckets of 60 and 40 floats, 2 ms and 3 ms: 400 bytes, 5 ms, under
	// the algorithm's label.
	h.Bucket(bucket{0, 60}, time.Now(), 2*time.Millisecond, true)
	h.Bucket(bucket{60, 100}, time.Now(), 3*time.Millisecond, false)
	if got := testutil.ToFloat64(m.allreduceBytes.WithLabelValues("ring")); got != 400 {
		t.Errorf("allreduce bytes %v, want 400", got)
	}
	if got := testutil.ToFloat64(m.allreduceSeconds.WithLabelValues("ring")); !near.Close(0.005, got, 1e-9, 0) {
		t.Errorf("allreduce seconds %v, want 0.005", got)
	}
	h.Log(&LogEvent{Loss: 0.5, Accuracy: 0.8})
	h.Epoch(&EpochEvent{Epoch: 3, TestLoss: 0.4, TestAcc: 0.9})
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"train loss", testutil.ToFloat64(m.loss.WithLabelValues("train")), 0.5},
		{"train accuracy", testutil.ToFloat64(m.accuracy.WithLabelValues("train")), 0.8},
		{"test loss", testutil.ToFloat64(m.loss.WithLabelValues("test")), 0.4},
		{"test accuracy", testutil.ToFloat64(m.accuracy.WithLabelValues("test")), 0.9},
		{"epoch", testutil.ToFloat64(m.epoch), 3},
	} {
		if c.got != c.want {
			t.Errorf("%s %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestServeMetrics: the server binds port + local rank and serves the
// registry, Go and process collectors included.
func TestServeMetrics(t *testing.T) {
	m := newMetrics()
	m.info.WithLabelValues("1", "1", "2", "mlp", "ring", "").Set(1)
	addr, srv, err := serveMetrics(m, "127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`train_info{allreduce="ring",local_rank="1",model="mlp",rank="1",slurm_job_id="",world_size="2"} 1`,
		"go_goroutines", "process_resident_memory_bytes", "train_samples_total 0"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// A fixed port is offset by the local rank.
	addr2, srv2, err := serveMetrics(m, "127.0.0.1:39411", 2)
	if err != nil {
		t.Fatal(err)
	}
	srv2.Close()
	if addr2 != "127.0.0.1:39413" {
		t.Errorf("port 39411 + local rank 2 bound %s", addr2)
	}
	for _, bad := range []string{"9400", "host:port", "127.0.0.1:70000"} {
		if _, _, err := serveMetrics(m, bad, 0); err == nil {
			t.Errorf("--metrics-addr %q accepted", bad)
		}
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine(15, 60, 1, 5, 0.4321, 1234.5, 83*time.Second)
	want := "[=======>                      ]  25% epoch 1/5 step 15/60 loss 0.4321 1234 samples/s ETA 1m23s"
	if got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
}

// TestPrometheusAssets: the Grafana dashboard queries only metrics train
// exports (or Prometheus' own up), and the README lists every train_
// metric train exports and no other.
func TestPrometheusAssets(t *testing.T) {
	m := newMetrics()
	m.loss.WithLabelValues("train")
	m.accuracy.WithLabelValues("train")
	m.phaseSeconds.WithLabelValues("data")
	m.allreduceBytes.WithLabelValues("ring")
	m.allreduceSeconds.WithLabelValues("ring")
	m.info.WithLabelValues("0", "0", "1", "mlp", "ring", "")
	rec := flightrec.New(8, nil)
	rec.Comm("world", 0, 1)
	m.watchFlight(rec)
	m.watchBadImages(func() float64 { return 0 })
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{"up": true}
	ours := map[string]bool{}
	for _, f := range families {
		n := f.GetName()
		exported[n] = true
		if strings.HasPrefix(n, "train_") {
			ours[n] = true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			exported[n+suffix] = true
		}
	}
	dash, err := os.ReadFile("../scripts/prometheus/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	name := regexp.MustCompile(`[a-z_]+_[a-z_]+|\bup\b`)
	functions := map[string]bool{"histogram_quantile": true, "label_values": true}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				if !functions[n] && !exported[n] && n != "world_size" {
					t.Errorf("panel %q queries %s, which train does not export", p.Title, n)
				}
			}
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, n := range regexp.MustCompile("`(train_[a-z_]+)`").FindAllStringSubmatch(string(readme), -1) {
		listed[n[1]] = true
	}
	for n := range ours {
		if !listed[n] {
			t.Errorf("README does not list %s", n)
		}
	}
	for n := range listed {
		if !ours[n] {
			t.Errorf("README lists %s, which train does not export", n)
		}
	}
}

// BenchmarkObservePerStep is the cost metrics and the timeline add to one
// training step: the metrics and timeline hooks' Step (histograms, six
// spans) and one gradient bucket's counters and span. Compare it with a
// step's time (train bench step, or the throughput line) to get the
// overhead.
func BenchmarkObservePerStep(b *testing.B) {
	tl, err := timeline.Create(filepath.Join(b.TempDir(), "tl.json"), 0, time.Now(), "training", "gradient allreduce")
	if err != nil {
		b.Fatal(err)
	}
	mh := newMetricsHookOn(newMetrics(), "ring")
	th := &timelineHook{tl: tl, errw: io.Discard}
	defer th.Close()
	st := stepTimes{start: time.Now(), data: time.Millisecond, forward: 2 * time.Millisecond,
		backward: 3 * time.Millisecond, wait: time.Millisecond, optimize: time.Millisecond}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e := StepEvent{Step: i + 1, Times: &st, Took: 8 * time.Millisecond, Samples: 64, LR: 0.1}
		mh.Step(&e)
		th.Step(&e)
		mh.Bucket(bucket{0, 1 << 20}, st.start, time.Millisecond, true)
		th.Bucket(bucket{0, 1 << 20}, st.start, time.Millisecond, true)
	}
}

// BenchmarkScrape is the cost of one Prometheus scrape of a rank's
// /metrics (the registry gathered and encoded), paid once per scrape
// interval, off the training goroutine.
func BenchmarkScrape(b *testing.B) {
	m := newMetrics()
	st := stepTimes{data: time.Millisecond, forward: time.Millisecond}
	m.observeStep(&st, 64, 0.1)
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	req := httptest.NewRequest("GET", "/metrics", nil)
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
	}
}
