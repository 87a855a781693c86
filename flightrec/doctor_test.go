package flightrec

import (
	"slices"
	"strings"
	"testing"
)

// The scenarios below are written by hand, event by event, as the ranks of
// a job that went wrong in a known way would have recorded them; the test
// checks that Diagnose names the rank and the call the scenario put there.

const sec = int64(1e9)

type job struct{ ds []Dump }

func newJob(n int, comms ...string) *job {
	j := &job{}
	for r := range n {
		d := Dump{Rank: r, Size: n, Reason: "stall", Time: 100 * sec, Step: 5, Phase: "computing", PhaseSince: 90 * sec}
		for _, c := range comms {
			d.Comms = append(d.Comms, CommInfo{Name: c, Rank: r, Size: n, Sent: make([]uint64, n), Recvd: make([]uint64, n)})
		}
		j.ds = append(j.ds, d)
	}
	return j
}

// add records a call on rank r from start to end seconds (end 0: in
// flight) and counts it as the communicator's counters would.
func (j *job) add(r int, comm string, op string, peer int, bytes int64, start, end float64) {
	d := &j.ds[r]
	var ci *CommInfo
	for i := range d.Comms {
		if d.Comms[i].Name == comm {
			ci = &d.Comms[i]
		}
	}
	var seq uint64
	switch {
	case peer == All:
		ci.Seq++
		seq = ci.Seq
	case op == "send":
		ci.Sent[peer]++
		seq = ci.Sent[peer]
	case op == "recv":
		ci.Recvd[peer]++
		seq = ci.Recvd[peer]
	}
	e := Event{ID: uint64(len(d.Events)), Comm: comm, Seq: seq, Op: op, Algo: "ring", Peer: peer, Bytes: bytes, Dtype: "float32",
		Step: 5, Phase: "computing", Enq: int64(start * 1e9), Start: int64(start * 1e9)}
	if end > 0 {
		e.End = int64(end * 1e9)
	}
	d.Events = append(d.Events, e)
}

// steps records n complete steps of one gradient allreduce and one stop
// check on every rank, from time t, each a second long.
func (j *job) steps(n int, t float64) float64 {
	for range n {
		for r := range j.ds {
			j.add(r, "world", "allreduce", All, 4<<20, t, t+0.5)
			j.add(r, "world", "allreduce", All, 8, t+0.6, t+0.61)
		}
		t++
	}
	return t
}

func only(t *testing.T, rep Report, kind string) Finding {
	t.Helper()
	var got []Finding
	for _, f := range rep.Findings {
		if f.Kind == kind {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("want one %q finding, got %d:\n%s", kind, len(got), strings.Join(rep.Lines(), "\n"))
	}
	return got[0]
}

func TestDoctorBehind(t *testing.T) {
	j := newJob(4, "world")
	t0 := j.steps(5, 10)
	for _, r := range []int{0, 2, 3} {
		j.add(r, "world", "allreduce", All, 4<<20, t0, 0)
	}
	rep := Diagnose(j.ds)
	f := only(t, rep, "behind")
	if f.Rank != 1 || !slices.Equal(f.Others, []int{0, 2, 3}) || f.Seq != 11 || f.Comm != "world" || !(f.Waited >= 84 && f.Waited <= 86) {
		t.Errorf("finding %+v", f)
	}
	if len(rep.Findings) != 1 || !strings.Contains(f.Text, "rank 1 never entered it") {
		t.Errorf("report:\n%s", strings.Join(rep.Lines(), "\n"))
	}
}

func TestDoctorSkippedCollective(t *testing.T) {
	j := newJob(4, "world")
	t0 := j.steps(5, 10)
	for _, r := range []int{0, 2, 3} {
		j.add(r, "world", "allreduce", All, 4<<20, t0, 0)
	}
	j.add(1, "world", "allreduce", All, 8, t0, 0) // rank 1 went on to the stop check
	f := only(t, Diagnose(j.ds), "mismatch")
	if f.Rank != 1 || f.Seq != 11 || f.Call.Bytes != 8 || f.Their.Bytes != 4<<20 || !slices.Equal(f.Others, []int{0, 2, 3}) {
		t.Errorf("finding %+v", f)
	}
}

func TestDoctorOtherSize(t *testing.T) {
	j := newJob(3, "world")
	t0 := j.steps(2, 10)
	j.add(0, "world", "allreduce", All, 4<<20, t0, 0)
	j.add(1, "world", "allreduce", All, 4<<20, t0, 0)
	j.add(2, "world", "allreduce", All, 2<<20, t0, 0)
	f := only(t, Diagnose(j.ds), "mismatch")
	if f.Rank != 2 || f.Seq != 5 || !strings.Contains(f.Text, "rank 2 called it with a different size") {
		t.Errorf("finding %+v", f)
	}
}

func TestDoctorTwoRanksDisagree(t *testing.T) {
	j := newJob(2, "world")
	j.add(0, "world", "allreduce", All, 4<<20, 10, 0)
	j.add(1, "world", "bcast", All, 4<<20, 10, 0)
	f := only(t, Diagnose(j.ds), "mismatch")
	if f.Rank != -1 || !strings.Contains(f.Text, "rank 0") || !strings.Contains(f.Text, "rank 1") {
		t.Errorf("no majority, so no rank to blame: %+v", f)
	}
}

func TestDoctorStuckEverywhere(t *testing.T) {
	j := newJob(3, "world")
	t0 := j.steps(2, 10)
	for r := range 3 {
		j.add(r, "world", "allreduce", All, 4<<20, t0, 0)
	}
	f := only(t, Diagnose(j.ds), "stuck")
	if f.Seq != 5 || len(f.Others) != 3 {
		t.Errorf("finding %+v", f)
	}
}

// A parameter server (rank 3) waits for worker 1, which went quiet; the
// other workers wait for the server's answer.
func TestDoctorSilentWorker(t *testing.T) {
	j := newJob(4, "world", "workers")
	j.ds[3].Comms = j.ds[3].Comms[:1] // the server is not a worker
	for step := range 4 {
		t := 10 + float64(step)
		for w := range 3 {
			j.add(w, "world", "send", 3, 4<<20, t, t+0.1)
			j.add(3, "world", "recv", w, 4<<20, t, t+0.1)
		}
		for w := range 3 {
			j.add(3, "world", "send", w, 4<<20, t+0.2, t+0.3)
			j.add(w, "world", "recv", 3, 4<<20, t+0.2, t+0.3)
		}
	}
	j.add(0, "world", "send", 3, 4<<20, 14, 14.1)
	j.add(3, "world", "recv", 0, 4<<20, 14, 14.1)
	j.add(2, "world", "send", 3, 4<<20, 14, 14.1)
	j.add(0, "world", "recv", 3, 4<<20, 14.2, 0)
	j.add(2, "world", "recv", 3, 4<<20, 14.2, 0)
	j.add(3, "world", "recv", 1, 4<<20, 14.1, 0)
	rep := Diagnose(j.ds)
	if len(rep.Findings) != 3 {
		t.Fatalf("report:\n%s", strings.Join(rep.Lines(), "\n"))
	}
	root := rep.Findings[0]
	if root.Kind != "no-message" || root.Rank != 1 || !slices.Equal(root.Others, []int{3}) || root.Seq != 5 {
		t.Errorf("the cause: %+v", root)
	}
	for _, f := range rep.Findings[1:] {
		if f.Kind != "waits-on" || f.Rank != 3 || !strings.HasSuffix(f.Text, "which waits in turn for rank 1") {
			t.Errorf("a consequence: %+v", f)
		}
	}
}

// slowSteps records n steps from time t, each step long, of a 3-rank
// job whose rank 2 enters each gradient allreduce late seconds after the
// others, who wait for it; then a stop check on every rank.
func (j *job) slowSteps(n int, t, late, step float64) float64 {
	for range n {
		for r := range 3 {
			if r == 2 {
				j.add(r, "world", "allreduce", All, 4<<20, t+late, t+late+0.05)
			} else {
				j.add(r, "world", "allreduce", All, 4<<20, t, t+late+0.05)
			}
			j.add(r, "world", "allreduce", All, 8, t+late+0.1, t+late+0.11)
		}
		t += step
	}
	return t
}

// sigusr2 diagnoses the job as dumped by SIGUSR2 on every rank at time t.
func (j *job) sigusr2(t float64) Report {
	for i := range j.ds {
		j.ds[i].Time = int64(t * 1e9)
		j.ds[i].Reason = "SIGUSR2"
	}
	return Diagnose(j.ds)
}

func TestDoctorSlowRank(t *testing.T) {
	j := newJob(3, "world")
	// Rank 2 spends 1.2 s more computing; the others wait for it.
	tm := j.slowSteps(8, 10, 1.2, 2)
	// Dumped (SIGUSR2) while the others were waiting for it again.
	j.add(0, "world", "allreduce", All, 4<<20, tm, 0)
	j.add(1, "world", "allreduce", All, 4<<20, tm, 0)
	rep := j.sigusr2(tm + 0.5)
	f := only(t, rep, "slow")
	if len(rep.Findings) != 1 || f.Rank != 2 || !slices.Equal(f.Others, []int{0, 1}) || !(f.Waited >= 1.15 && f.Waited <= 1.25) {
		t.Fatalf("finding %+v\n%s", f, strings.Join(rep.Lines(), "\n"))
	}
	if !strings.Contains(f.Text, "was last at 8") || !strings.Contains(f.Text, "When the dumps were taken") {
		t.Errorf("text: %s", f.Text)
	}
}

// A SIGUSR2 dump that lands as a slow rank's lateness begins: one rank
// has just entered the collective, another is still on its way to it.
// Neither is stuck; the slow rank is still named.
func TestDoctorSlowRankCaughtEarly(t *testing.T) {
	j := newJob(3, "world")
	tm := j.slowSteps(8, 10, 0.7, 1)
	j.add(1, "world", "allreduce", All, 4<<20, tm, 0)
	rep := j.sigusr2(tm + 0.01)
	f := only(t, rep, "slow")
	if len(rep.Findings) != 1 || f.Rank != 2 || !slices.Equal(f.Others, []int{0, 1}) || !(f.Waited >= 0.65 && f.Waited <= 0.75) {
		t.Fatalf("finding %+v\n%s", f, strings.Join(rep.Lines(), "\n"))
	}
}

func TestDoctorNothingWrong(t *testing.T) {
	j := newJob(3, "world")
	j.steps(6, 10)
	rep := Diagnose(j.ds)
	if len(rep.Findings) != 0 || !strings.HasPrefix(rep.Lines()[1], "nothing wrong") {
		t.Errorf("report:\n%s", strings.Join(rep.Lines(), "\n"))
	}
}

func TestDoctorMissingDump(t *testing.T) {
	j := newJob(3, "world")
	j.steps(2, 10)
	rep := Diagnose(j.ds[:2])
	f := only(t, rep, "missing")
	if f.Rank != 2 {
		t.Errorf("finding %+v", f)
	}
}
