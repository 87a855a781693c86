package trainer

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus/push"
)

// pushHook sends rank 0's metrics to the Pushgateway (--pushgateway), for
// batch jobs that end between scrapes: every --pushgateway-every steps and
// at the end. A failure is a warning: the gateway may be down, training
// goes on.
type pushHook struct {
	hookBase
	p     *push.Pusher
	url   string
	every int
	s     *Session
}

func newPushHook(s *Session) (Hook, error) {
	o := &s.Cfg.Observe
	if o.Pushgateway == "" || s.Job.Rank() != 0 {
		return nil, nil
	}
	p := push.New(o.Pushgateway, PushJob(o.Job.SlurmJob)).Gatherer(s.met.reg).Grouping("instance", "rank0")
	return &pushHook{p: p, url: o.Pushgateway, every: o.PushgatewayEvery, s: s}, nil
}

// PushJob is the Pushgateway job name: "train", or "train_slurm_<id>"
// inside Slurm job id, so concurrent jobs do not overwrite each other.
func PushJob(slurmJob string) string {
	if slurmJob != "" {
		return "train_slurm_" + slurmJob
	}
	return "train"
}

func (h *pushHook) push() {
	if err := h.p.Push(); err != nil {
		fmt.Fprintf(h.s.errw, "train: rank 0: --pushgateway %s: %v\n", h.url, err)
	}
}

func (h *pushHook) Step(e *StepEvent) error {
	if h.every > 0 && e.Step%h.every == 0 {
		h.push()
	}
	return nil
}

func (h *pushHook) End(*EndEvent) { h.push() }
