package data

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Tar shards in WebDataset's layout: each sample is the run of
// consecutive members that share a key (the member's path up to the first
// dot of its base name), here an image (key.jpg, key.png, ...) and its
// class index as decimal text (key.cls). `train data pack` writes them,
// with a PAX global header first that gives the shard's sample and class
// counts (paxSamples, paxClasses), so opening a shard reads one block;
// shards made by other tools are counted by reading their headers.
const (
	paxSamples = "TRAIN.samples"
	paxClasses = "TRAIN.classes"
)

// TarShards are the shards a pattern names, counted.
type TarShards struct {
	Pattern string
	Paths   []string
	Counts  []int // samples in each
	Classes int   // the largest class index in them, plus one
	Scanned int   // shards without train's header, counted by reading them
	starts  []int // the first id of each shard, and N last
}

// OpenTarShards expands pattern's braces and counts the samples of
// each shard. A shard that is missing or not a tar file is an error
// naming it.
func OpenTarShards(pattern string) (*TarShards, error) {
	paths, err := ExpandBraces(pattern)
	if err != nil {
		return nil, err
	}
	t := &TarShards{Pattern: pattern, Paths: paths, Counts: make([]int, len(paths))}
	classes := make([]int, len(paths))
	scanned := make([]bool, len(paths))
	errs := make([]error, len(paths))
	ForEach(len(paths), 8, func(i int) {
		t.Counts[i], classes[i], scanned[i], errs[i] = countShard(paths[i])
	})
	t.starts = make([]int, len(paths)+1)
	for i, p := range paths {
		if errs[i] != nil {
			var pe *fs.PathError
			if errors.As(errs[i], &pe) {
				errs[i] = pe.Err // the path is named once
			}
			return nil, fmt.Errorf("tar shard %s: %v", p, errs[i])
		}
		if t.Counts[i] == 0 {
			return nil, fmt.Errorf("tar shard %s: no samples in it (WebDataset's layout: key.jpg or key.png with key.cls)", p)
		}
		t.Classes = max(t.Classes, classes[i])
		if scanned[i] {
			t.Scanned++
		}
		t.starts[i+1] = t.starts[i] + t.Counts[i]
	}
	return t, nil
}

// N is the samples in all the shards.
func (t *TarShards) N() int { return t.starts[len(t.Paths)] }

// countShard counts a shard's samples and classes from train's header,
// or by reading every member's header (and .cls) when it has none.
func countShard(p string) (n, classes int, scanned bool, err error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	h, err := tr.Next()
	if err != nil {
		return 0, 0, false, notTar(err)
	}
	if h.Typeflag == tar.TypeXGlobalHeader && h.PAXRecords[paxSamples] != "" {
		n, err1 := strconv.Atoi(h.PAXRecords[paxSamples])
		c, err2 := strconv.Atoi(h.PAXRecords[paxClasses])
		if err1 != nil || err2 != nil || n < 0 || c < 0 {
			return 0, 0, false, fmt.Errorf("a header with %s=%q %s=%q: not counts", paxSamples, h.PAXRecords[paxSamples], paxClasses, h.PAXRecords[paxClasses])
		}
		return n, c, false, nil
	}
	r := &shardReader{f: f, tr: tr, peek: h}
	for {
		s, err := r.sample(true)
		if err == io.EOF {
			return n, classes, true, nil
		}
		if err != nil {
			return 0, 0, true, err
		}
		n++
		classes = max(classes, int(s.label)+1)
	}
}

func notTar(err error) error {
	if errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
		return fmt.Errorf("not a tar file, or cut short (%v)", err)
	}
	return err
}

// splitKey is WebDataset's base_plus_ext: the member's key and the
// extension after the first dot of its base name (ok false: no dot).
func splitKey(name string) (key, ext string, ok bool) {
	dir, base := path.Split(name)
	stem, ext, ok := strings.Cut(base, ".")
	if !ok || stem == "" {
		return "", "", false
	}
	return dir + stem, ext, true
}

// rawSample is one sample's members as read.
type rawSample struct {
	key   string
	name  string // the image member, for errors: shard.tar:key.jpg
	image []byte
	label int32
}

// shardReader reads one shard's samples in order.
type shardReader struct {
	path string
	f    *os.File
	tr   *tar.Reader
	peek *tar.Header // the next sample's first member, read already
	next int         // the index of the next sample in the shard
}

func openShard(p string) (*shardReader, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	return &shardReader{path: p, f: f, tr: tar.NewReader(f)}, nil
}

func (r *shardReader) close() { r.f.Close() }

// sample reads the next sample; skip reads only its label (the image's
// bytes are passed over by a seek). io.EOF: no more.
func (r *shardReader) sample(skip bool) (rawSample, error) {
	s := rawSample{label: -1}
	for {
		h := r.peek
		r.peek = nil
		if h == nil {
			var err error
			if h, err = r.tr.Next(); err == io.EOF {
				if s.key == "" {
					return s, io.EOF
				}
				break
			} else if err != nil {
				return s, notTar(err)
			}
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		key, ext, ok := splitKey(h.Name)
		if !ok {
			continue
		}
		if s.key != "" && key != s.key {
			r.peek = h
			break
		}
		s.key = key
		switch e := strings.ToLower(ext); {
		case e == "cls":
			b, err := io.ReadAll(io.LimitReader(r.tr, 32))
			if err != nil {
				return s, err
			}
			v, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || v < 0 {
				return s, fmt.Errorf("%s: %q is not a class index", h.Name, b)
			}
			s.label = int32(v)
		case isImage("." + e):
			if s.name != "" {
				return s, fmt.Errorf("sample %s has two images (%s and %s)", key, path.Base(s.name), h.Name)
			}
			s.name = r.path + ":" + h.Name
			if !skip {
				if h.Size > 1<<30 {
					return s, fmt.Errorf("%s: an image of %d bytes", h.Name, h.Size)
				}
				s.image = make([]byte, h.Size)
				if _, err := io.ReadFull(r.tr, s.image); err != nil {
					return s, fmt.Errorf("%s: %v", h.Name, notTar(err))
				}
			}
		}
	}
	switch {
	case s.name == "":
		return s, fmt.Errorf("sample %s has no image (key.jpg, key.png, ...)", s.key)
	case s.label < 0:
		return s, fmt.Errorf("sample %s has no class (key.cls)", s.key)
	}
	r.next++
	return s, nil
}

// TarSet is tar shards seen through a View: the samples a Stream plans,
// read in each rank's read order and decoded batch by batch.
type TarSet struct {
	*TarShards
	View
	// Keys, when set, keeps each sample's key from its reading until
	// TakeKey asks for it (a record of what was trained on).
	Keys bool

	mu       sync.Mutex
	rd       *shardReader
	shard    int     // rd's
	read     []int   // this rank's read order (Expect)
	at       []int32 // each id's index in read, -1: not in it
	nextRead int
	buf      map[int]rawSample // read, not yet in a batch
	keys     map[int]string
	last     rawSample // the last good sample, for Skip
}

// Len is the samples in the shards.
func (t *TarSet) Len() int { return t.N() }

// SampleSize is the values of one sample, 3 x Size x Size.
func (t *TarSet) SampleSize() int { return 3 * t.Size * t.Size }

// Expect tells the set the order this rank reads its samples in (a
// Segment's Rank), so that batches read ahead along it; what was read
// for an earlier order is dropped.
func (t *TarSet) Expect(read []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.read, t.nextRead, t.buf = read, 0, map[int]rawSample{}
	if t.at == nil {
		t.at = make([]int32, t.N())
	}
	for i := range t.at {
		t.at[i] = -1
	}
	for i, id := range read {
		t.at[id] = int32(i)
	}
}

// TakeKey is sample id's key, once (Keys set); "" if not read.
func (t *TarSet) TakeKey(id int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.keys[id]
	delete(t.keys, id)
	return k
}

// Batch reads samples idx (reading ahead along the Expect order until
// each is in; an id off it is read on its own), then decodes and
// transforms them across Workers goroutines into x and y.
func (t *TarSet) Batch(x []float32, y []int32, idx []int, epoch int) error {
	raws := make([]rawSample, len(idx))
	t.mu.Lock()
	if t.buf == nil {
		t.buf = map[int]rawSample{}
	}
	for b, id := range idx {
		for {
			if s, ok := t.buf[id]; ok {
				raws[b] = s
				delete(t.buf, id)
				break
			}
			if t.nextRead >= len(t.read) || !t.ahead(id) {
				s, err := t.load(id)
				if err != nil {
					t.mu.Unlock()
					return err
				}
				raws[b] = s
				break
			}
			rid := t.read[t.nextRead]
			t.nextRead++
			s, err := t.load(rid)
			if err != nil {
				t.mu.Unlock()
				return err
			}
			t.buf[rid] = s
		}
	}
	t.mu.Unlock()
	if err := t.decode(x, y, idx, raws, epoch); err != nil {
		return err
	}
	if t.Keys { // what was trained on: a replaced sample's replacement
		t.mu.Lock()
		if t.keys == nil {
			t.keys = map[int]string{}
		}
		for b, id := range idx {
			t.keys[id] = raws[b].key
		}
		t.mu.Unlock()
	}
	return nil
}

// ahead reports whether id is still to come in the read order, so
// reading on along it will find it.
func (t *TarSet) ahead(id int) bool { return t.at != nil && int(t.at[id]) >= t.nextRead }

// load reads sample id: on from the open shard when id is ahead in it,
// else from its shard opened anew, passing over the samples before it.
func (t *TarSet) load(id int) (rawSample, error) {
	sh := sort.SearchInts(t.starts, id+1) - 1
	off := id - t.starts[sh]
	if t.rd == nil || t.shard != sh || t.rd.next > off {
		if t.rd != nil {
			t.rd.close()
		}
		rd, err := openShard(t.Paths[sh])
		if err != nil {
			t.rd = nil
			return rawSample{}, fmt.Errorf("tar shard %s: %v", t.Paths[sh], err)
		}
		t.rd, t.shard = rd, sh
	}
	for t.rd.next < off {
		if _, err := t.rd.sample(true); err != nil {
			return rawSample{}, t.shardErr(err)
		}
	}
	s, err := t.rd.sample(false)
	if err != nil {
		return rawSample{}, t.shardErr(err)
	}
	if s.label >= int32(t.Classes) {
		return rawSample{}, fmt.Errorf("tar shard %s: sample %s is of class %d, but the training shards have %d classes", t.Paths[sh], s.key, s.label, t.Classes)
	}
	return s, nil
}

func (t *TarSet) shardErr(err error) error {
	if err == io.EOF {
		err = errors.New("fewer samples than when it was counted: was it rewritten during the run?")
	}
	return fmt.Errorf("tar shard %s: %v", t.rd.path, err)
}

// decode writes the views of raws into x and y. A sample that does not
// decode is the error, or with Skip is told to it and replaced by the
// batch's next good sample (or the last good one this set decoded): the
// rank's steps never depend on what decodes.
func (t *TarSet) decode(x []float32, y []int32, idx []int, raws []rawSample, epoch int) error {
	n := t.SampleSize()
	errs := make([]error, len(idx))
	ForEach(len(idx), t.Workers, func(b int) {
		y[b], errs[b] = raws[b].label, t.render(x[b*n:(b+1)*n], raws[b].image, raws[b].name, idx[b], epoch)
	})
	good := -1
	for b, err := range errs {
		if err == nil {
			good = b
			continue
		}
		if t.Skip == nil {
			return err
		}
		t.Skip(raws[b].name, err)
	}
	if good < 0 && t.last.image == nil {
		if len(idx) > 0 {
			return fmt.Errorf("tar shards %s: no image of this batch decodes, nor any before it (--skip-bad)", t.Pattern)
		}
		return nil
	}
	for b, err := range errs {
		if err != nil {
			// The next good one in the batch, cyclically, else the last one.
			src, label := -1, int32(0)
			for k := 1; k < len(idx); k++ {
				if j := (b + k) % len(idx); errs[j] == nil {
					src = j
					break
				}
			}
			if src >= 0 {
				copy(x[b*n:(b+1)*n], x[src*n:(src+1)*n])
				label, raws[b].key = y[src], raws[src].key
			} else if err := t.render(x[b*n:(b+1)*n], t.last.image, t.last.name, idx[b], epoch); err == nil {
				label, raws[b].key = t.last.label, t.last.key
			}
			y[b] = label
		}
	}
	if good >= 0 {
		t.mu.Lock()
		t.last = raws[good]
		t.mu.Unlock()
	}
	return nil
}

// ShardPattern is the shard pattern --data names for split (train or
// val): path itself when it names .tar files, or, for a directory that
// `train data pack` wrote, its split-000000.tar ... in a brace range.
func ShardPattern(path, split string) (string, bool) {
	if strings.HasSuffix(path, ".tar") {
		return path, true
	}
	if _, err := os.Stat(filepath.Join(path, split+"-000000.tar")); err != nil {
		return "", false
	}
	n := 1
	for {
		if _, err := os.Stat(filepath.Join(path, fmt.Sprintf("%s-%06d.tar", split, n))); err != nil {
			break
		}
		n++
	}
	return filepath.Join(path, fmt.Sprintf("%s-{000000..%06d}.tar", split, n-1)), true
}

// Check decodes every image of the shards, workers shards at a time,
// and returns the samples that do not decode, each named (shard:member)
// with the reason, in the shards' order. A shard that does not read as
// tar is the error.
func (t *TarShards) Check(workers int) ([]error, error) {
	bad := make([][]error, len(t.Paths))
	errs := make([]error, len(t.Paths))
	ForEach(len(t.Paths), workers, func(i int) {
		r, err := openShard(t.Paths[i])
		if err != nil {
			errs[i] = err
			return
		}
		defer r.close()
		for {
			s, err := r.sample(false)
			if err == io.EOF {
				return
			}
			if err != nil {
				errs[i] = fmt.Errorf("tar shard %s: %v", t.Paths[i], err)
				return
			}
			if _, _, _, err := decodeBytesInto(nil, s.image, s.name); err != nil {
				bad[i] = append(bad[i], err)
			}
		}
	})
	var all []error
	for i := range t.Paths {
		if errs[i] != nil {
			return nil, errs[i]
		}
		all = append(all, bad[i]...)
	}
	return all, nil
}
