package trainer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"train/flightrec"
)

// Phases of a training step, the values of the phase label.
const (
	phaseData      = "data"
	phaseForward   = "forward"
	phaseBackward  = "backward"
	phaseWait      = "allreduce_wait"
	phaseOptimizer = "optimizer"
)

// metrics are one rank's Prometheus metrics, on a registry of their own
// (with the Go runtime and process collectors) so tests can read them and
// nothing global is touched. The README lists them.
type metrics struct {
	reg              *prometheus.Registry
	samples          prometheus.Counter
	steps            prometheus.Counter
	epoch            prometheus.Gauge
	loss             *prometheus.GaugeVec
	accuracy         *prometheus.GaugeVec
	lr               prometheus.Gauge
	stepSeconds      prometheus.Histogram
	phaseSeconds     *prometheus.HistogramVec
	allreduceBytes   *prometheus.CounterVec
	allreduceSeconds *prometheus.CounterVec
	ckptSeconds      prometheus.Histogram
	ckptLast         prometheus.Gauge
	psStaleness      prometheus.Histogram
	bucketBytes      prometheus.Gauge
	info             *prometheus.GaugeVec
}

// stepBuckets span 1 ms to about 30 s: an MLP step to a large model's.
var stepBuckets = prometheus.ExponentialBuckets(0.001, 2, 16)

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		samples: prometheus.NewCounter(prometheus.CounterOpts{Name: "train_samples_total",
			Help: "Training samples this rank has processed."}),
		steps: prometheus.NewCounter(prometheus.CounterOpts{Name: "train_steps_total",
			Help: "Training steps this rank has completed (in this process)."}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{Name: "train_epoch",
			Help: "Current epoch, from 1."}),
		loss: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "train_loss",
			Help: "Mean cross-entropy over all ranks: split=train over the last log window, split=test at the last evaluation."}, []string{"split"}),
		accuracy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "train_accuracy_ratio",
			Help: "Fraction classified right over all ranks, as train_loss."}, []string{"split"}),
		lr: prometheus.NewGauge(prometheus.GaugeOpts{Name: "train_learning_rate",
			Help: "Learning rate of the last step."}),
		stepSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "train_step_duration_seconds",
			Help: "Wall time of a training step on this rank.", Buckets: stepBuckets}),
		phaseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "train_step_phase_duration_seconds",
			Help: "Wall time of each part of a step: data, forward, backward (with overlapped allreduces running), allreduce_wait (after backward), optimizer.", Buckets: stepBuckets}, []string{"phase"}),
		allreduceBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "train_allreduce_bytes_total",
			Help: "Bytes of gradient buffer allreduced by this rank."}, []string{"algorithm"}),
		allreduceSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "train_allreduce_seconds_total",
			Help: "Time spent inside gradient allreduces on this rank (overlapped with backward or not)."}, []string{"algorithm"}),
		ckptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "train_checkpoint_duration_seconds",
			Help: "Time to write a checkpoint (rank 0).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		ckptLast: prometheus.NewGauge(prometheus.GaugeOpts{Name: "train_checkpoint_last_success_timestamp_seconds",
			Help: "Unix time of the last checkpoint written (rank 0)."}),
		bucketBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "train_bucket_bytes",
			Help: "The gradient buckets' size cap in bytes (--bucket-mb; with auto, the size being tried, then the one kept)."}),
		psStaleness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "train_ps_staleness_updates",
			Help: "ps-async servers: updates by other workers applied between a worker's pull and its push, per push.", Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64}}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "train_info",
			Help: "Constant 1, labelled with this rank's place in the job."},
			[]string{"rank", "local_rank", "world_size", "model", "allreduce", "slurm_job_id"}),
	}
	reg.MustRegister(m.samples, m.steps, m.epoch, m.loss, m.accuracy, m.lr, m.stepSeconds, m.phaseSeconds,
		m.allreduceBytes, m.allreduceSeconds, m.ckptSeconds, m.ckptLast, m.psStaleness, m.bucketBytes, m.info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// serveMetrics listens on host:port+localRank and serves /metrics in the
// background; it returns the address bound.
func serveMetrics(m *metrics, addr string, localRank int) (string, *http.Server, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-addr %q: want HOST:PORT or :PORT (\"\" turns metrics off)", addr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port+localRank > 65535 {
		return "", nil, fmt.Errorf("--metrics-addr %q: bad port", addr)
	}
	if port != 0 {
		port += localRank
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener failed after start: nothing left to serve
		}
	}()
	return ln.Addr().String(), srv, nil
}

// stepTimes are the parts of one step, for the histograms and the
// timeline.
type stepTimes struct {
	start                                   time.Time
	data, forward, backward, wait, optimize time.Duration
}

func (m *metrics) observeStep(st *stepTimes, samples int, lr float64) {
	if m == nil {
		return
	}
	total := st.data + st.forward + st.backward + st.wait + st.optimize
	m.samples.Add(float64(samples))
	m.steps.Inc()
	m.lr.Set(lr)
	m.stepSeconds.Observe(total.Seconds())
	m.phaseSeconds.WithLabelValues(phaseData).Observe(st.data.Seconds())
	m.phaseSeconds.WithLabelValues(phaseForward).Observe(st.forward.Seconds())
	m.phaseSeconds.WithLabelValues(phaseBackward).Observe(st.backward.Seconds())
	m.phaseSeconds.WithLabelValues(phaseWait).Observe(st.wait.Seconds())
	m.phaseSeconds.WithLabelValues(phaseOptimizer).Observe(st.optimize.Seconds())
}

// metricsHook feeds a rank's Prometheus metrics from the loop, serves
// them on --metrics-addr's port plus the local rank (a port that cannot be
// bound is a warning: training matters more than its dashboard, and
// another job on the node may hold the port), and keeps the registry the
// Pushgateway hook pushes.
type metricsHook struct {
	hookBase
	m           *metrics
	bytes, secs prometheus.Counter // the allreduce counters under this run's algorithm
	srv         *http.Server
}

func newMetricsHookOn(m *metrics, algo string) *metricsHook {
	return &metricsHook{m: m, bytes: m.allreduceBytes.WithLabelValues(algo), secs: m.allreduceSeconds.WithLabelValues(algo)}
}

func newMetricsHook(s *Session) (Hook, error) {
	o := &s.Cfg.Observe
	if o.MetricsAddr == "" && o.Pushgateway == "" {
		return nil, nil
	}
	algo := s.Cfg.Dist.Allreduce.String()
	h := newMetricsHookOn(newMetrics(), algo)
	w := s.Job
	h.m.info.WithLabelValues(strconv.Itoa(w.Rank()), strconv.Itoa(w.LocalRank()), strconv.Itoa(w.Size()),
		s.Cfg.Model.Kind, algo, o.Job.SlurmJob).Set(1)
	h.m.bucketBytes.Set(float64(s.Cfg.Dist.Buckets.Bytes()))
	if s.flight != nil {
		h.m.watchFlight(s.flight.rec)
	}
	h.m.watchBadImages(func() float64 { return float64(s.badImages.Load()) })
	s.met = h.m
	if o.MetricsAddr != "" {
		addr, srv, err := serveMetrics(h.m, o.MetricsAddr, w.LocalRank())
		if err != nil {
			fmt.Fprintf(s.errw, "train: rank %d: metrics not served: %v (choose another --metrics-addr, or \"\" for none)\n", w.Rank(), err)
		} else {
			h.srv = srv
			s.rep.say("metrics: http://%s/metrics (each rank on port + its local rank)\n", addr)
		}
	}
	return h, nil
}

func (h *metricsHook) Step(e *StepEvent) error {
	h.m.observeStep(e.Times, e.Samples, e.LR)
	return nil
}

func (h *metricsHook) Log(e *LogEvent) {
	h.m.loss.WithLabelValues("train").Set(e.Loss)
	h.m.accuracy.WithLabelValues("train").Set(e.Accuracy)
}

func (h *metricsHook) Epoch(e *EpochEvent) {
	h.m.epoch.Set(float64(e.Epoch))
	h.m.loss.WithLabelValues("test").Set(e.TestLoss)
	h.m.accuracy.WithLabelValues("test").Set(e.TestAcc)
}

func (h *metricsHook) Checkpoint(e *CheckpointEvent) {
	h.m.ckptSeconds.Observe(e.Took.Seconds())
	h.m.ckptLast.SetToCurrentTime()
}

// Bucket counts a gradient bucket's bytes and seconds under the
// --allreduce algorithm's label.
func (h *metricsHook) Bucket(b bucket, _ time.Time, d time.Duration, _ bool) {
	h.bytes.Add(float64(4 * (b.hi - b.lo)))
	h.secs.Add(d.Seconds())
}

func (h *metricsHook) BucketBytes(capBytes int) { h.m.bucketBytes.Set(float64(capBytes)) }
func (h *metricsHook) Staleness(updates int)    { h.m.psStaleness.Observe(float64(updates)) }

func (h *metricsHook) Close() error {
	if h.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h.srv.Shutdown(ctx)
		cancel()
	}
	return nil
}

// collectiveSeqs is train_collective_seq: each communicator's count of
// collectives begun on this rank, read from the flight recorder at each
// scrape. A rank whose count stops while the others' climb is falling
// behind, before the watchdog's --stall-warn fires.
type collectiveSeqs struct{ rec *flightrec.Recorder }

// watchBadImages exports train_bad_images_total, read from n.
func (m *metrics) watchBadImages(n func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "train_bad_images_total",
		Help: "Images of an image folder this rank skipped because they do not decode (--skip-bad)."}, n))
}

// watchFlight exports rec's sequence numbers (train_collective_seq).
func (m *metrics) watchFlight(rec *flightrec.Recorder) { m.reg.MustRegister(collectiveSeqs{rec}) }

var collectiveSeqDesc = prometheus.NewDesc("train_collective_seq",
	"Collectives this rank has begun on each communicator (the flight recorder's sequence number; --flight-events 0 turns it off).", []string{"comm"}, nil)

func (c collectiveSeqs) Describe(ch chan<- *prometheus.Desc) { ch <- collectiveSeqDesc }

func (c collectiveSeqs) Collect(ch chan<- prometheus.Metric) {
	for name, n := range c.rec.Seqs() {
		ch <- prometheus.MustNewConstMetric(collectiveSeqDesc, prometheus.GaugeValue, float64(n), name)
	}
}
