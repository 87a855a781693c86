package trainer

import (
	"errors"
	"fmt"

	"train/mpi"
)

// JobError is a failure every rank knows about, so the job can end with a
// normal MPI_Finalize and a non-zero exit on every rank instead of an
// abort. Own says whether this rank is the one that reports it (the lowest
// rank that failed), so the job prints one line, not one per rank.
type JobError struct {
	Err  error
	Rank int
	Own  bool
}

func (e *JobError) Error() string { return e.Err.Error() }
func (e *JobError) Unwrap() error { return e.Err }

// Agree tells every rank whether any rank's err is non-nil, with one
// allreduce: the lowest failing rank's error comes back as a JobError it
// owns; other ranks get a JobError naming that rank.
func Agree(w *mpi.World, err error) error {
	var je *JobError
	if errors.As(err, &je) {
		return err
	}
	first := []int64{int64(w.Size())}
	if err != nil {
		first[0] = int64(w.Rank())
	}
	if e := w.AllreduceInt64(first, mpi.Min); e != nil {
		return e
	}
	r := int(first[0])
	switch {
	case r == w.Size():
		return nil
	case r == w.Rank():
		return &JobError{Err: err, Rank: r, Own: true}
	default:
		return &JobError{Err: fmt.Errorf("rank %d failed", r), Rank: r}
	}
}

// verifyReplicas checks that every rank holds bit-identical parameters,
// given each rank's checksum of them (checkpoint.Checksum)
// (and model buffers, such as BatchNorm's running statistics):
// each rank's checksum goes into its slot of a vector summed across ranks,
// and every rank compares the slots with rank 0's. It returns rank 0's
// checksum, or a JobError (owned by rank 0) listing the ranks that differ.
func verifyReplicas(w *mpi.World, sum uint32) (uint32, error) {
	slots := make([]int64, w.Size())
	slots[w.Rank()] = int64(sum)
	if err := w.AllreduceInt64(slots, mpi.Sum); err != nil {
		return 0, err
	}
	var differ []int
	for r, s := range slots {
		if s != slots[0] {
			differ = append(differ, r)
		}
	}
	if len(differ) > 0 {
		return 0, &JobError{
			Err:  fmt.Errorf("replicas diverged: parameters of ranks %v differ from rank 0's (crc32c %08x)", differ, uint32(slots[0])),
			Rank: 0, Own: w.Rank() == 0,
		}
	}
	return uint32(slots[0]), nil
}
