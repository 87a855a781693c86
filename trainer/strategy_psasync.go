package trainer

import "fmt"

// psAsync is --strategy ps-async (Downpour, with stale-synchronous
// parallel's bound): the servers apply each worker's gradient as it comes
// and hold back the answer of a worker more than --staleness updates ahead
// of the slowest. Workers push every --push-every steps (summing the
// gradients between) and fetch every --fetch-every steps (Downpour's n_push
// and n_fetch), meet only at log steps, and fetch the servers' parameters
// before anyone looks at the replicas.
type psAsync struct {
	paramServers
	held   bool // the gradient buffer holds steps not pushed yet
	heldLR float64
}

func newPSAsync(s *Session) (Strategy, error) {
	return &psAsync{paramServers: paramServers{s: s, world: s.W, async: true}}, nil
}

func (p *psAsync) Describe() string {
	return fmt.Sprintf("%d asynchronous parameter server(s) on %s, staleness %d", len(p.shards), p.where(), p.s.Cfg.Dist.Staleness)
}

// BeginStep keeps the gradients of the steps since the last push: backward
// adds the next step's to them.
func (p *psAsync) BeginStep(int) bool { return !p.held }

// Communicate pushes every --push-every steps and fetches every
// --fetch-every; a fetch between pushes is a Pull request, within the
// staleness bound.
func (p *psAsync) Communicate(lr float64, t int) (bool, error) {
	d := &p.s.Cfg.Dist
	push, pull := t%d.PushEvery == 0, t%d.FetchEvery == 0
	p.held, p.heldLR = !push, lr
	return true, p.exchange(lr, t, push, pull)
}

// StopCheck: asynchronous workers meet only at log steps; elsewhere they
// run at their own pace.
func (p *psAsync) StopCheck(step int) bool { return step%p.s.Cfg.Observe.LogEvery == 0 }

// Sync pushes gradients still held, waits until every worker has (at a
// barrier: each then has its answers for all it pushed), and fetches the
// servers' parameters, which are then final for now.
func (p *psAsync) Sync() error {
	par := p.s.Model.Params
	if p.held {
		if err := p.client.Step(nil, par.Grad, p.heldLR, p.s.State.Step, true, false); err != nil {
			return err
		}
		p.held = false
	}
	if err := p.s.W.Barrier(); err != nil {
		return err
	}
	return p.client.Fetch(par.Data)
}
