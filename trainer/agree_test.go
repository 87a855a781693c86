package trainer

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"train/checkpoint"
	"train/mpi/mpitest"
)

// TestAgreeAndVerify runs under mpirun on 3 ranks: setup errors on ranks 1
// and 2 become one JobError owned by rank 1 on every rank, and a parameter
// that differs on rank 2 alone is reported, naming rank 2.
func TestAgreeAndVerify(t *testing.T) {
	if !mpitest.Launch(t, 3, time.Minute) {
		return
	}
	w := mpitest.World(t)
	r := w.Rank()

	if err := Agree(w, nil); err != nil {
		t.Fatalf("no failure, yet %v", err)
	}
	var mine error
	if r > 0 {
		mine = fmt.Errorf("rank %d's own problem", r)
	}
	var je *JobError
	if err := Agree(w, mine); !errors.As(err, &je) || je.Rank != 1 || je.Own != (r == 1) {
		t.Fatalf("rank %d: agree gave %#v", r, err)
	}
	if r == 1 && je.Err != mine {
		t.Errorf("rank 1 reports %v, not its own error", je.Err)
	}

	params := []float32{1, 2, 3, 4}
	if _, err := verifyReplicas(w, checkpoint.Checksum(params)); err != nil {
		t.Fatalf("identical replicas reported: %v", err)
	}
	if r == 2 {
		params[3] = 4.0000005 // one ulp or so
	}
	_, err := verifyReplicas(w, checkpoint.Checksum(params))
	if !errors.As(err, &je) || je.Own != (r == 0) || err.Error()[:len("replicas diverged: parameters of ranks [2]")] != "replicas diverged: parameters of ranks [2]" {
		t.Fatalf("rank %d: diverged replica gave %v", r, err)
	}
}
