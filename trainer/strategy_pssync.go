package trainer

import "fmt"

// psSync is --strategy ps-sync (Sandblaster; TensorFlow's
// SyncReplicasOptimizer): every step each worker pushes its gradient to
// the servers and pulls the parameters back; a server averages the
// workers' gradients for the step (in rank order) and updates once, so the
// replicas agree after every step.
type psSync struct{ paramServers }

func newPSSync(s *Session) (Strategy, error) {
	return &psSync{paramServers{s: s, world: s.W}}, nil
}

func (p *psSync) Describe() string {
	return fmt.Sprintf("%d synchronous parameter server(s) on %s", len(p.shards), p.where())
}
