package trainer

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/push"
)

// pushTimeout bounds one push: a gateway that accepts the connection and
// never answers held rank 0 inside the push, every rank waiting for it in
// the next step's collective, and SIGTERM unheard (it is acted on at a
// step's end).
const pushTimeout = 5 * time.Second

// pushHook sends rank 0's metrics to the Pushgateway (--pushgateway), for
// batch jobs that end between scrapes: every --pushgateway-every steps and
// at the end. A failure is a warning: the gateway may be down, training
// goes on. The steps' pushes run beside training, one at a time (a step
// whose push finds the last one still going skips it); the end's waits,
// at most pushTimeout. A failing gateway is reported once, and again
// when it answers.
type pushHook struct {
	hookBase
	p     *push.Pusher
	url   string
	every int
	errw  io.Writer

	mu     sync.Mutex
	busy   bool
	done   chan struct{} // closed when the push in flight ends
	failed int           // pushes failed since the last that went through
}

func newPushHook(s *Session) (Hook, error) {
	o := &s.Cfg.Observe
	if o.Pushgateway == "" || s.Job.Rank() != 0 {
		return nil, nil
	}
	p := push.New(o.Pushgateway, PushJob(o.Job.SlurmJob)).Gatherer(s.met.reg).Grouping("instance", "rank0").
		Client(&http.Client{Timeout: pushTimeout})
	return &pushHook{p: p, url: o.Pushgateway, every: o.PushgatewayEvery, errw: s.errw}, nil
}

// PushJob is the Pushgateway job name: "train", or "train_slurm_<id>"
// inside Slurm job id, so concurrent jobs do not overwrite each other.
func PushJob(slurmJob string) string {
	if slurmJob != "" {
		return "train_slurm_" + slurmJob
	}
	return "train"
}

// start begins a push unless one is in flight (then it returns false).
func (h *pushHook) start() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.busy {
		return false
	}
	h.busy, h.done = true, make(chan struct{})
	go func(done chan struct{}) {
		err := h.p.Push()
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case err != nil && h.failed == 0:
			// One line: the gateway's reply body may hold newlines.
			msg := strings.Join(strings.Fields(err.Error()), " ")
			fmt.Fprintf(h.errw, "train: rank 0: --pushgateway %s: %s (training goes on; said again when a push goes through)\n", h.url, msg)
			h.failed++
		case err != nil:
			h.failed++
		case h.failed > 0:
			fmt.Fprintf(h.errw, "train: rank 0: --pushgateway %s: pushing again after %d failed push(es)\n", h.url, h.failed)
			h.failed = 0
		}
		h.busy = false
		close(done)
	}(h.done)
	return true
}

// wait is until the push in flight, if any, ends.
func (h *pushHook) wait() {
	h.mu.Lock()
	done := h.done
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (h *pushHook) Step(e *StepEvent) error {
	if h.every > 0 && e.Step%h.every == 0 {
		h.start()
	}
	return nil
}

// End pushes the final metrics, after the push in flight.
func (h *pushHook) End(*EndEvent) {
	h.wait()
	h.start()
	h.wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed > 0 {
		fmt.Fprintf(h.errw, "train: rank 0: --pushgateway %s: the last %d push(es), the final one included, failed\n", h.url, h.failed)
	}
}
