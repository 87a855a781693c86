package trainer

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/push"
)

// observe starts what watches the run: the metrics and their server,
// the Pushgateway pusher (rank 0), and the timeline. A metrics port that
// cannot be bound is a warning, not a failure: training matters more than
// its dashboard (another job on the node may hold the port). A timeline
// that cannot be written is an error every rank agrees on.
func (r *run) observe() error {
	c := &r.cfg
	w := r.w
	if c.MetricsAddr != "" || c.Pushgateway != "" {
		r.met = newMetrics()
		job := os.Getenv("SLURM_JOB_ID")
		r.met.info.WithLabelValues(strconv.Itoa(w.Rank()), strconv.Itoa(w.LocalRank()), strconv.Itoa(w.Size()),
			r.model.Config.Kind, c.Allreduce, job).Set(1)
	}
	if r.met != nil {
		r.met.bucketBytes.Set(float64(int(c.BucketMB * (1 << 20))))
	}
	r.observeBuckets()
	if c.MetricsAddr != "" {
		addr, srv, err := serveMetrics(r.met, c.MetricsAddr, w.LocalRank())
		if err != nil {
			fmt.Fprintf(r.errw, "train: rank %d: metrics not served: %v (choose another --metrics-addr, or \"\" for none)\n", w.Rank(), err)
		} else {
			r.srv = srv
			r.rep.say("metrics: http://%s/metrics (each rank on port + its local rank)\n", addr)
		}
	}
	if c.Pushgateway != "" && w.Rank() == 0 {
		r.pusher = push.New(c.Pushgateway, PushJob()).Gatherer(r.met.reg).Grouping("instance", "rank0")
	}
	if c.Timeline == "" {
		return nil
	}
	// One clock origin for every rank's file: rank 0's now.
	origin := []int64{time.Now().UnixNano()}
	if err := w.BcastInt64(origin, 0); err != nil {
		return err
	}
	tl, err := openTimeline(TimelinePath(c.Timeline, w.Rank()), w.Rank(), time.Unix(0, origin[0]))
	if err := agree(w, err); err != nil {
		return err
	}
	r.tl = tl
	r.rep.say("timeline: %s (one file per rank; join them with train timeline merge)\n", TimelinePath(c.Timeline, 0))
	return nil
}

// PushJob is the Pushgateway job name: "train", or "train_slurm_<id>"
// inside a Slurm job, so concurrent jobs do not overwrite each other.
func PushJob() string {
	if id := os.Getenv("SLURM_JOB_ID"); id != "" {
		return "train_slurm_" + id
	}
	return "train"
}

// pushMetrics sends rank 0's metrics to the Pushgateway; a failure is a
// warning (the gateway may be down; training goes on).
func (r *run) pushMetrics() {
	if r.pusher == nil {
		return
	}
	if err := r.pusher.Push(); err != nil {
		fmt.Fprintf(r.errw, "train: rank 0: --pushgateway %s: %v\n", r.cfg.Pushgateway, err)
	}
}

// closeObservers stops the metrics server and closes the timeline.
func (r *run) closeObservers() {
	if r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r.srv.Shutdown(ctx)
		cancel()
	}
	if err := r.tl.close(); err != nil {
		fmt.Fprintf(r.errw, "train: rank %d: %v\n", r.w.Rank(), err)
	}
}

// observeBuckets makes the gradient buckets' allreduces feed the metrics
// and the timeline, when either is on (again after --bucket-mb auto
// rebuilds them).
func (r *run) observeBuckets() {
	c := &r.cfg
	if r.met == nil && c.Timeline == "" {
		return
	}
	r.sync.observe = func(b bucket, start time.Time, d time.Duration, overlapped bool) {
		if r.met != nil {
			r.met.allreduceBytes.WithLabelValues(c.Allreduce).Add(float64(4 * (b.hi - b.lo)))
			r.met.allreduceSeconds.WithLabelValues(c.Allreduce).Add(d.Seconds())
		}
		tid := tidTraining
		if overlapped {
			tid = tidComm
		}
		r.tl.span("allreduce", tid, start, d, map[string]any{"bytes": 4 * (b.hi - b.lo), "offset": b.lo})
	}
}
