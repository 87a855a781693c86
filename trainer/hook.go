package trainer

import "time"

// Hook watches the run, fed by the loop (the Horovod habit: the timeline
// and the stall inspector are small units the loop feeds, never polled
// and never in the way of a step). The loop calls Step after every step,
// Log at log steps with the figures agreed over the ranks, Epoch after an
// evaluation, Checkpoint after one is written, and End once training is
// over and the replicas are checked. Step may return an error (a hook
// that talks to the other ranks can fail); the others only observe.
//
// A hook is a file of its own and one line in hookMakers; hookBase gives
// the methods it does not need.
type Hook interface {
	Step(e *StepEvent) error
	Log(e *LogEvent)
	Epoch(e *EpochEvent)
	Checkpoint(e *CheckpointEvent)
	End(e *EndEvent)
	Close() error
}

// hookMakers build the hooks a run asks for, in the order they hear
// events; a maker returns nil when its hook is not wanted. (The bucket
// tuner is added by the allreduce strategy; bench strategies adds its
// counters.)
var hookMakers = []func(s *Session) (Hook, error){
	newReportHook,
	newMetricsHook,
	newTimelineHook,
	newPushHook,
}

// StepEvent is one finished training step.
type StepEvent struct {
	Step     int // steps done, this one included
	Epoch    int // from 1
	Times    *stepTimes
	Took     time.Duration // the step: data, forward, backward, wait, update
	Wait     time.Duration // of it and after it, waiting for other ranks
	Samples  int           // the global batch
	LR       float64
	Loss     float64       // this rank's
	Ran      int           // steps this process has run
	StepTime time.Duration // their time together
	Total    int           // steps planned (epochs or --max-steps)
}

// LogEvent is a log step: the window since the last one, summed over all
// ranks.
type LogEvent struct {
	Epoch, Step, StepInEpoch, StepsPerEpoch int
	Loss, Accuracy, LR, SamplesPerSecond    float64
	WaitMs                                  float64 // waiting for gradients, per step (rank 0)
}

// EpochEvent is an evaluation: the epoch (or the part of it that ran)
// and the test set, summed over all ranks.
type EpochEvent struct {
	Epoch, Step                                 int
	Done                                        bool // the epoch ran to its end (else a stopped run's part)
	TrainLoss, TrainAccuracy, TestLoss, TestAcc float64
	Took                                        time.Duration // the epoch's training
	EvalStart                                   time.Time
	EvalTook                                    time.Duration
}

// CheckpointEvent is a checkpoint rank 0 wrote.
type CheckpointEvent struct {
	Step  int
	Path  string
	Start time.Time
	Took  time.Duration
}

// EndEvent is the end of training, after the replica check.
type EndEvent struct {
	Step, Ran             int // the last step, and steps this process ran
	Global                int // global batch
	StepTime, WaitTime    time.Duration
	FLOPsPerSample        int64
	Ranks                 int    // replicas checked (of each part, on a grid)
	Parts                 int    // the parts of a model-parallel grid; 1 without
	CRC                   uint32 // rank 0's parameters and buffers
	StopBy, CheckpointDir string
}

// hookBase is a hook's default: nothing to do.
type hookBase struct{}

func (hookBase) Step(*StepEvent) error       { return nil }
func (hookBase) Log(*LogEvent)               {}
func (hookBase) Epoch(*EpochEvent)           {}
func (hookBase) Checkpoint(*CheckpointEvent) {}
func (hookBase) End(*EndEvent)               {}
func (hookBase) Close() error                { return nil }

// Optional interfaces: a hook that also watches the gradient buckets, the
// parameter servers' staleness or the bucket size implements these.
type (
	bucketWatcher interface {
		// Bucket hears of every bucket reduced, from whichever goroutine
		// reduced it (overlapped: the communication goroutine).
		Bucket(b bucket, start time.Time, d time.Duration, overlapped bool)
	}
	bucketSizeWatcher interface{ BucketBytes(capBytes int) }
	stalenessWatcher  interface{ Staleness(updates int) }
	// evalWatcher hears the evaluations --eval-every asks for inside
	// epochs.
	evalWatcher interface{ Eval(e *EvalEvent) }
	// pipeWatcher hears each operation of a pipeline stage's schedule.
	pipeWatcher interface{ Pipe(e *PipeEvent) }
)

// PipeEvent is one operation of a pipeline stage's schedule: a forward or
// backward of a micro-batch, the posting of a send, or the wait for a
// receive (Took is the time spent waiting: near zero when the message had
// already arrived).
type PipeEvent struct {
	Op          PipeOp
	Dir         PipeOp // of a send or receive: PipeForward (activations) or PipeBackward (gradients)
	Micro       int
	Stage, Peer int // this stage, and the stage sent to or received from
	Flow        int // a send and its receive share it: an id unique in the run
	Start       time.Time
	Took        time.Duration
}

// PipeOp names a pipeline operation.
type PipeOp string

const (
	PipeForward  PipeOp = "F"
	PipeBackward PipeOp = "B"
	PipeSend     PipeOp = "send"
	PipeRecv     PipeOp = "recv"
)

// EvalEvent is an evaluation of the test split inside an epoch, summed
// over all ranks.
type EvalEvent struct {
	Epoch, Step       int
	Samples           int64 // trained on so far (a language model's tokens are Samples x context)
	TestLoss, TestAcc float64
	Took              time.Duration
}
