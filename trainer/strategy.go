package trainer

import "time"

// Strategy is how the replicas stay in step (--strategy): what becomes of
// the gradients a step computed, and what makes the replicas agree before
// anyone looks at them. The loop calls, per step: BeginStep before
// forward; GradReady from backward; Communicate after backward (its time
// is the step's communication wait); AfterStep after the update. Sync
// runs before every evaluation, checkpoint and the end.
//
// A strategy is a file of its own, registered in strategies; strategyBase
// gives the methods most of them leave alone.
type Strategy interface {
	// Start runs once every rank holds the initial state: a strategy may
	// split the world here (the Session's W becomes this rank's trainers)
	// and reports whether this rank serves instead of training.
	Start() (serve bool, err error)
	// Serve is a server rank's whole run.
	Serve() error
	// Describe is the log's account of the strategy.
	Describe() string
	// BeginStep starts step (0-based) and reports whether the gradient
	// buffer is to be cleared (ps-async keeps summing until a push).
	BeginStep(step int) (zero bool)
	// GradReady is backward's hook: gradients from lo on are final.
	GradReady(lo int)
	// Communicate ends the step's communication once backward is done:
	// waits for the gradient reduction, or exchanges with the parameter
	// servers, which then have done the update (updated).
	Communicate(lr float64, t int) (updated bool, err error)
	// AfterStep runs after step's update (its number from 1), and returns
	// the time it waited for other ranks.
	AfterStep(step int) (time.Duration, error)
	// StopCheck reports whether the ranks agree on stop signals after
	// step (ps-async workers meet only at log steps).
	StopCheck(step int) bool
	// Sync makes the replicas' parameters and optimizer state identical
	// (local SGD averages them; ps-async fetches the servers').
	Sync() error
	// BeforeSave (rank 0, before a checkpoint) brings state kept elsewhere
	// into the host buffers and adds the strategy's metadata.
	BeforeSave(meta map[string]string) error
	// Waiting is the time the training goroutine waited for gradients
	// since the last call (the log's gradient wait).
	Waiting() time.Duration
	// Finish ends a trainer's run (the servers hear of it); Close frees
	// what Start made.
	Finish() error
	Close()
}

// strategies builds the strategy of each --strategy.
var strategies = map[StrategyKind]func(s *Session) (Strategy, error){
	AllreduceStrategy: newAllreduce,
	LocalSGD:          newLocalSGD,
	PSSync:            newPSSync,
	PSAsync:           newPSAsync,
}

// strategyBase is what a strategy that does not split the world, has no
// servers and keeps no state elsewhere does.
type strategyBase struct{}

func (strategyBase) Start() (bool, error)                   { return false, nil }
func (strategyBase) Serve() error                           { return nil }
func (strategyBase) BeginStep(int) bool                     { return true }
func (strategyBase) GradReady(int)                          {}
func (strategyBase) Communicate(float64, int) (bool, error) { return false, nil }
func (strategyBase) AfterStep(int) (time.Duration, error)   { return 0, nil }
func (strategyBase) StopCheck(int) bool                     { return true }
func (strategyBase) Sync() error                            { return nil }
func (strategyBase) BeforeSave(map[string]string) error     { return nil }
func (strategyBase) Waiting() time.Duration                 { return 0 }
func (strategyBase) Finish() error                          { return nil }
func (strategyBase) Close()                                 {}
