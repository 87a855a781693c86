// Package checkpoint is train's checkpoint file: safetensors holding a
// model's parameters and buffers under their PyTorch names, the optimizer's
// state, and the run's position, written atomically and checked on load.
// It knows the model's layout (params.Params) and nothing of MPI or
// training.
package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"unsafe"

	"github.com/nlpodyssey/safetensors"

	"train/params"
)

// Checkpoint file format, version 1: safetensors
// (https://github.com/huggingface/safetensors), read and written with
// github.com/nlpodyssey/safetensors.
//
//   - Tensors: the model's parameters and buffers (BatchNorm's running
//     statistics, F32, and num_batches_tracked, an I64 scalar) under their
//     PyTorch state_dict names and shapes, and the optimizer's state
//     buffers under "optimizer.<buffer>.<parameter name>", same shapes.
//   - Metadata (string to string): "format" = Format, the run's
//     position (step, epoch, step_in_epoch), how it was made (seed,
//     world_size, batch_size, model config as JSON, optimizer and its
//     hyperparameters) and "crc32c": CRC-32C (Castagnoli) of the tensors'
//     bytes taken in the order of their names, so any flipped byte of data is
//     caught on load. Nothing time-dependent goes in: the same state gives
//     the same bytes.
const Format = "train.checkpoint/v1"

// optimPrefix starts the names of optimizer state tensors; filter them out
// to load a checkpoint into a torch.nn.Module.
const optimPrefix = "optimizer."

var ckptName = regexp.MustCompile(`^step-(\d{8,})(\.safetensors)?$`)

// Path names the checkpoint of a step; the zero padding makes
// names sort by step.
func Path(dir string, step int) string {
	return filepath.Join(dir, fmt.Sprintf("step-%08d.safetensors", step))
}

// State is what a checkpoint holds: the parameters, the model's buffers,
// the optimizer's state (the parameters' layout) and where the run was.
type State struct {
	Params      []float32
	Buffers     []float32
	Optim       map[string][]float32
	Step        int
	Epoch       int
	StepInEpoch int
	// Samples is the position in samples: how many the run has trained
	// on (its learning-rate schedule follows it). -1 when a checkpoint
	// from before it was recorded was loaded.
	Samples int64
	Meta    map[string]string
	// WrapFile, when set, wraps the file Write writes to (fault
	// injection: a crash half way through a write).
	WrapFile func(io.Writer) io.Writer
}

// tensorView is a slice of one of the flat buffers seen as a safetensors
// tensor, without a copy.
type tensorView struct {
	dtype safetensors.DType
	data  []float32 // the tensor's float32 slots (an I64 holds two)
	shape []int
}

func viewOf(t params.Tensor, buf []float32) tensorView {
	dt := safetensors.F32
	if t.Int64 {
		dt = safetensors.I64
	}
	return tensorView{dt, t.Of(buf), t.Shape}
}

func (v tensorView) DType() safetensors.DType { return v.dtype }
func (v tensorView) Shape() []uint64 {
	s := make([]uint64, len(v.shape))
	for i, d := range v.shape {
		s[i] = uint64(d)
	}
	return s
}
func (v tensorView) Data() []byte    { return Bytes(v.data) }
func (v tensorView) DataLen() uint64 { return uint64(4 * len(v.data)) }

// Bytes is the little-endian bytes of v, shared with v (the machines we
// run on are little-endian, as safetensors is).
func Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum is the CRC-32C of the tensors' bytes in name order.
func checksum(names []string, data func(string) []byte) uint32 {
	sorted := slices.Sorted(slices.Values(names))
	var c uint32
	for _, n := range sorted {
		c = crc32.Update(c, castagnoli, data(n))
	}
	return c
}

// tensorViews lays out s's buffers as named tensors of p's layout.
func tensorViews(p *params.Params, s *State) map[string]tensorView {
	views := make(map[string]tensorView, len(p.Tensors)*(1+len(s.Optim))+len(p.BufferTensors))
	for _, t := range p.Tensors {
		views[t.Name] = viewOf(t, s.Params)
		for buf, v := range s.Optim {
			views[optimPrefix+buf+"."+t.Name] = viewOf(t, v)
		}
	}
	for _, t := range p.BufferTensors {
		views[t.Name] = viewOf(t, s.Buffers)
	}
	for _, t := range p.Ties { // the same bytes again, for PyTorch's strict load
		views[t.Name] = viewOf(t.Of, s.Params)
	}
	return views
}

// Save writes s to dir as step-NNNNNNNN.safetensors.
func Save(dir string, p *params.Params, s *State) (string, error) {
	final := Path(dir, s.Step)
	return final, Write(final, p, s)
}

// Write writes s to path atomically: a temporary file in the
// same directory, fsync, rename to path, fsync of the directory. A crash
// at any point leaves either the complete new file or none (and a stray
// temporary that loaders ignore), never a torn one; other files are not
// touched.
func Write(final string, p *params.Params, s *State) error {
	meta := map[string]string{"format": Format}
	for k, v := range s.Meta {
		meta[k] = v
	}
	SetPosition(meta, s)
	return writeViews(final, tensorViews(p, s), meta, s.WrapFile)
}

// SetPosition records s's position in a checkpoint's metadata (a single
// file's, or a sharded checkpoint's index).
func SetPosition(meta map[string]string, s *State) {
	meta["step"] = strconv.Itoa(s.Step)
	meta["epoch"] = strconv.Itoa(s.Epoch)
	meta["step_in_epoch"] = strconv.Itoa(s.StepInEpoch)
	meta["samples"] = strconv.FormatInt(s.Samples, 10)
}

// position reads the step, epoch and step in epoch that SetPosition
// recorded; where names the metadata in an error.
func position(meta map[string]string, where string) ([3]int, error) {
	var pos [3]int
	for i, k := range []string{"step", "epoch", "step_in_epoch"} {
		v, err := strconv.Atoi(meta[k])
		if err != nil || v < 0 {
			return pos, fmt.Errorf("bad %s %q in %s", k, meta[k], where)
		}
		pos[i] = v
	}
	return pos, nil
}

// writeViews writes views and meta (with the views' checksum added) to
// final atomically, as Write says.
func writeViews(final string, views map[string]tensorView, meta map[string]string, wrap func(io.Writer) io.Writer) error {
	names := make([]string, 0, len(views))
	for n := range views {
		names = append(names, n)
	}
	meta["crc32c"] = fmt.Sprintf("%08x", checksum(names, func(n string) []byte { return views[n].Data() }))

	return writeAtomic(final, func(out io.Writer) error {
		if wrap != nil {
			out = wrap(out)
		}
		w := bufio.NewWriterSize(out, 1<<20)
		if err := safetensors.SerializeToWriter(views, meta, w); err != nil {
			return err
		}
		return w.Flush()
	})
}

// writeAtomic writes final through fill atomically: a temporary file in
// the same directory, fsync, rename to final, fsync of the directory. A
// crash at any point leaves either the complete new file or none (and a
// stray temporary that loaders ignore), never a torn one.
func writeAtomic(final string, fill func(io.Writer) error) error {
	dir := filepath.Dir(final)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		// The temporary's name means nothing to the user: name the
		// directory and the cause.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("checkpoint %s: cannot write in %s: %w", final, dir, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this finds nothing
	err = fill(tmp)
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp made it 0600
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), final)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", final, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Load reads the checkpoint at path into s's buffers, which must
// have p's layout, checking the format, the checksum and that every tensor
// is there with its shape and nothing else is.
func Load(path string, p *params.Params, s *State) error {
	if err := loadCheckpoint(path, p, s); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}

// readFile reads and parses the safetensors file at path.
func readFile(path string) ([]byte, safetensors.SafeTensors, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, safetensors.SafeTensors{}, err
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		return nil, st, fmt.Errorf("not a valid safetensors file: %v", err)
	}
	return buf, st, nil
}

func loadCheckpoint(path string, p *params.Params, s *State) error {
	buf, st, err := readFile(path)
	if err != nil {
		return err
	}
	_, md, _ := safetensors.ReadMetadata(buf)
	meta := md.Metadata()
	if f := meta["format"]; f != Format {
		return fmt.Errorf("format %q, this train reads %q", f, Format)
	}
	names := st.Names()
	want, err := strconv.ParseUint(meta["crc32c"], 16, 32)
	if err != nil {
		return fmt.Errorf("bad crc32c %q in metadata", meta["crc32c"])
	}
	got := checksum(names, func(n string) []byte { v, _ := st.Tensor(n); return v.Data() })
	if uint32(want) != got {
		return fmt.Errorf("checksum mismatch (file says %08x, data gives %08x): the file is corrupt", want, got)
	}
	views := tensorViews(p, s)
	tied := 0 // files from before ties were saved have none
	for _, t := range p.Ties {
		if tv, ok := st.Tensor(t.Name); ok {
			tied++
			of, ok := st.Tensor(t.Of.Name)
			if ok && !slices.Equal(tv.Data(), of.Data()) {
				return fmt.Errorf("tensor %q differs from %q, which it is tied to (one name of the same weights)", t.Name, t.Of.Name)
			}
		}
	}
	if len(names) != len(views)-len(p.Ties)+tied {
		return fmt.Errorf("holds %d tensors, this model and optimizer have %d (written by another --model, --hidden or optimizer?)", len(names), len(views))
	}
	for _, n := range names {
		v, ok := views[n]
		if !ok {
			return fmt.Errorf("tensor %q is not in this model (written by another --model or --hidden?)", n)
		}
		tv, _ := st.Tensor(n)
		if tv.DType() != v.DType() || !slices.Equal(tv.Shape(), v.Shape()) {
			return fmt.Errorf("tensor %q is %v %v, this model has %v %v", n, tv.DType(), tv.Shape(), v.DType(), v.Shape())
		}
	}
	pos, err := position(meta, "metadata")
	if err != nil {
		return err
	}
	samples := int64(-1)
	if v, ok := meta["samples"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad samples %q in metadata", v)
		}
		samples = n
	}
	// Every check passed: only now touch the live buffers, so a bad file
	// leaves them as they were.
	for _, n := range names {
		tv, _ := st.Tensor(n)
		copy(views[n].Data(), tv.Data())
	}
	s.Step, s.Epoch, s.StepInEpoch, s.Samples = pos[0], pos[1], pos[2], samples
	s.Meta = meta
	return nil
}

// List returns the checkpoints in dir, oldest step first: single files
// and sharded directories whose index was written (an unfinished one is
// not a checkpoint). A missing dir has none.
func List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type ck struct {
		step int
		path string
	}
	var cks []ck
	for _, e := range entries {
		m := ckptName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() != (m[2] == "") {
			continue
		}
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), IndexName)); err != nil {
				continue
			}
		}
		step, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		cks = append(cks, ck{step, filepath.Join(dir, e.Name())})
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].step < cks[j].step })
	paths := make([]string, len(cks))
	for i, c := range cks {
		paths[i] = c.path
	}
	return paths, nil
}

// Prune deletes all but the newest keep checkpoints in dir
// (keep <= 0 keeps all).
func Prune(dir string, keep int) error {
	if keep <= 0 {
		return nil
	}
	paths, err := List(dir)
	if err != nil {
		return err
	}
	for len(paths) > keep {
		if err := os.RemoveAll(paths[0]); err != nil {
			return err
		}
		paths = paths[1:]
	}
	return nil
}

// Checksum is the CRC-32C of the bytes of the given buffers, in order: the
// replica check compares it across ranks.
func Checksum(bufs ...[]float32) uint32 {
	var c uint32
	for _, b := range bufs {
		c = crc32.Update(c, castagnoli, Bytes(b))
	}
	return c
}
