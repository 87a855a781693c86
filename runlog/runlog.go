// Package runlog is a training run's log as JSON lines (--log-file
// run.jsonl): one record per log step, per evaluation and at the start and
// end, written by rank 0; and the curves drawn from it (train plot).
package runlog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Record is one line of the log. Type is "start", "step", "epoch" or
// "done"; the other fields are set where they mean something for the type.
type Record struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	// start (Step is the step it starts from: 0, or a resumed checkpoint's)
	Model     string `json:"model,omitempty"`
	Params    int    `json:"params,omitempty"`
	WorldSize int    `json:"world_size,omitempty"`
	Batch     int    `json:"global_batch,omitempty"`
	SlurmJob  string `json:"slurm_job_id,omitempty"`
	Restart   string `json:"slurm_restart_count,omitempty"`
	// step and epoch
	Epoch int `json:"epoch,omitempty"`
	Step  int `json:"step,omitempty"`
	// step: averages over all ranks since the last step record
	Loss             *float64 `json:"loss,omitempty"`
	Accuracy         *float64 `json:"accuracy,omitempty"`
	LR               *float64 `json:"lr,omitempty"`
	SamplesPerSecond *float64 `json:"samples_per_second,omitempty"`
	GradientWaitMs   *float64 `json:"gradient_wait_ms,omitempty"`
	// epoch
	TrainLoss     *float64 `json:"train_loss,omitempty"`
	TrainAccuracy *float64 `json:"train_accuracy,omitempty"`
	TestLoss      *float64 `json:"test_loss,omitempty"`
	TestAccuracy  *float64 `json:"test_accuracy,omitempty"`
	Seconds       *float64 `json:"seconds,omitempty"`
}

// F is a float field's value.
func F(v float64) *float64 { return &v }

// Writer appends records to a file, one JSON object per line, flushed per
// record so a killed run keeps its log.
type Writer struct {
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
}

// Create opens path for a new log, truncating it, or, when resume is set,
// appends to it: a resumed or requeued job keeps its first part's log, and
// Latest later drops the records the resumed run repeats.
func Create(path string, resume bool) (*Writer, error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if resume {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--log-file: %v", err)
	}
	w := bufio.NewWriter(f)
	return &Writer{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Write appends r; a nil Writer writes nothing.
func (w *Writer) Write(r Record) error {
	if w == nil {
		return nil
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	if err := w.enc.Encode(r); err != nil {
		return err
	}
	return w.w.Flush()
}

// Close closes the file.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	w.w.Flush()
	return w.f.Close()
}

// Read parses a log; a line that is not a record is an error naming it.
func Read(r io.Reader, name string) ([]Record, error) {
	var recs []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Type == "" {
			return nil, fmt.Errorf("%s:%d: not a run log record (written by train --log-file?)", name, line)
		}
		recs = append(recs, rec)
	}
	return recs, sc.Err()
}

// Latest is the history of the run as it finally went: a "start" record at
// step s (a resume) drops the records of steps after s written before it,
// which the resumed run does again. recs is not modified.
func Latest(recs []Record) []Record {
	var out []Record
	for _, r := range recs {
		if r.Type == "start" {
			kept := out[:0:0]
			for _, o := range out {
				if o.Step <= r.Step || o.Type == "start" {
					kept = append(kept, o)
				}
			}
			out = kept
		}
		out = append(out, r)
	}
	return out
}

// ReadFile reads the log at path.
func ReadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path)
}
