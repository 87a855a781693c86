package data

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
)

// Stream plans the epochs of samples read sequentially from shards (tar
// files): unlike an image folder, no sample is read on its own, so the
// order cannot be one permutation of every sample as Sampler's is.
//
// An epoch reads the shards in an order drawn from (Seed, epoch), and its
// samples in each shard in the shard's order: the epoch's read order.
// Those not yet consumed in the epoch are cut into Size contiguous chunks,
// one per data-parallel rank, so each rank reads whole runs of shards from
// start to end and no sample is read by two ranks. Each rank passes its
// chunk through a shuffle buffer of Buffer samples (WebDataset's shuffle:
// once full, a random one leaves as each new one comes in) and trains on
// the first Steps x Batch it lets out. Steps is the same on every rank,
// the remaining samples over Size x Batch, rounded down: as Sampler does,
// the last (remaining mod Size x Batch) of the epoch are left out, a
// different few each epoch, and every rank runs the same steps. np=N does
// not see np=1's order (each rank's buffer mixes only its own chunk).
//
// A run stopped mid-epoch records the samples the epoch has consumed
// (Segment.Consumed, in the checkpoint); a run resuming at another np or
// batch cuts what is left among its own ranks (a new Segment), so every
// sample is still read once in the epoch. Resuming at the same np and
// batch continues the same segment: the same order, bit for bit.
type Stream struct {
	Counts      []int // samples in each shard, in the pattern's order
	Seed        uint64
	Shuffle     bool // false: shards in the pattern's order, no buffer
	Buffer      int  // the shuffle buffer, in samples (1 or less: none)
	Batch, Size int  // per-rank batch; data-parallel ranks
}

// N is the samples in all shards. A sample's id is its index in the
// shards' concatenation in the pattern's order.
func (s Stream) N() int {
	n := 0
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// StepsPerEpoch is the steps of an epoch started afresh.
func (s Stream) StepsPerEpoch() int { return s.N() / (s.Batch * s.Size) }

// readOrder is epoch's read order: every id, shard by shard.
func (s Stream) readOrder(epoch int) []int {
	starts := make([]int, len(s.Counts)+1)
	for i, c := range s.Counts {
		starts[i+1] = starts[i] + c
	}
	shards := make([]int, len(s.Counts))
	for i := range shards {
		shards[i] = i
	}
	if s.Shuffle {
		shards = Permutation(len(s.Counts), s.Seed^0x5a4d5, uint64(epoch))
	}
	ids := make([]int, 0, starts[len(s.Counts)])
	for _, sh := range shards {
		for id := starts[sh]; id < starts[sh+1]; id++ {
			ids = append(ids, id)
		}
	}
	return ids
}

// Segment is the part of an epoch that runs at one np and batch: from
// step Start, on the samples not in the consumed set it began with.
type Segment struct {
	Epoch, Start, Steps int
	s                   Stream
	before              Bitset
	chunks              [][]int // each rank's, in read order
}

// Segment plans epoch from step start, every sample in consumed (nil:
// none) already trained on in it.
func (s Stream) Segment(epoch, start int, consumed Bitset) *Segment {
	n := s.N()
	if consumed == nil {
		consumed = NewBitset(n)
	}
	var left []int
	for _, id := range s.readOrder(epoch) {
		if !consumed.Has(id) {
			left = append(left, id)
		}
	}
	g := &Segment{Epoch: epoch, Start: start, Steps: len(left) / (s.Batch * s.Size), s: s, before: consumed}
	for r := range s.Size {
		g.chunks = append(g.chunks, left[r*len(left)/s.Size:(r+1)*len(left)/s.Size])
	}
	return g
}

// Rank is rank r's part: the ids it reads, in the order it reads them,
// and the Steps x Batch it trains on, in the order it trains on them.
func (g *Segment) Rank(r int) (read, order []int) {
	read = g.chunks[r]
	k := g.s.Buffer
	if !g.s.Shuffle || k < 1 {
		k = 1
	}
	rng := rand.NewPCG(g.s.Seed^0xb0ffe7, uint64(g.Epoch)<<40|uint64(g.Start)<<16|uint64(r))
	order = bufferShuffle(read, k, rng)[:g.Steps*g.s.Batch]
	return read, order
}

// Consumed is the epoch's consumed set after the segment's first steps:
// the set it began with and what every rank trained on since.
func (g *Segment) Consumed(steps int) Bitset {
	c := g.before.Clone()
	for r := range g.s.Size {
		_, order := g.Rank(r)
		for _, id := range order[:min(steps, g.Steps)*g.s.Batch] {
			c.Set(id)
		}
	}
	return c
}

// bufferShuffle is ids as a shuffle buffer of k lets them out: the first
// k fill it; then each next one takes the place of a random one, which
// leaves; at the end the rest leave in random order. k = 1 keeps the
// order.
func bufferShuffle(ids []int, k int, rng *rand.PCG) []int {
	out := make([]int, 0, len(ids))
	buf := make([]int, 0, min(k, len(ids)))
	for _, id := range ids {
		if len(buf) < k {
			buf = append(buf, id)
			continue
		}
		j := bounded(rng, uint64(k))
		out = append(out, buf[j])
		buf[j] = id
	}
	for len(buf) > 0 {
		j := bounded(rng, uint64(len(buf)))
		out = append(out, buf[j])
		buf[j] = buf[len(buf)-1]
		buf = buf[:len(buf)-1]
	}
	return out
}

// Bitset is a set of sample ids.
type Bitset []uint64

// NewBitset is an empty set of ids below n.
func NewBitset(n int) Bitset { return make(Bitset, (n+63)/64) }

func (b Bitset) Has(i int) bool { return b[i/64]>>(i%64)&1 == 1 }
func (b Bitset) Set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b Bitset) Clone() Bitset  { return append(Bitset(nil), b...) }

// Count is the ids in the set.
func (b Bitset) Count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// StreamPosition is where a run stands in an epoch of a Stream, as a
// checkpoint keeps it: the segment running (its epoch, first step, np,
// batch and the consumed set it began with) and the step reached.
type StreamPosition struct {
	Epoch    int    `json:"epoch"`
	Start    int    `json:"start"`
	Step     int    `json:"step"`
	Size     int    `json:"size"`
	Batch    int    `json:"batch"`
	Samples  int    `json:"samples"`  // in all shards, to catch other shards
	Consumed string `json:"consumed"` // the Bitset at Start, deflated, base64
}

// Position is the segment's position at step (of the epoch), as text.
func (g *Segment) Position(step int) string {
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestSpeed)
	for _, x := range g.before {
		var b [8]byte
		for i := range b {
			b[i] = byte(x >> (8 * i))
		}
		w.Write(b[:])
	}
	w.Close()
	p, _ := json.Marshal(StreamPosition{Epoch: g.Epoch, Start: g.Start, Step: step, Size: g.s.Size, Batch: g.s.Batch,
		Samples: g.s.N(), Consumed: base64.StdEncoding.EncodeToString(z.Bytes())})
	return string(p)
}

// Resume places a run of s in the epoch a checkpoint's position (text
// from Position) stood in: the same segment when np and batch are the
// same, else a new one from start on what the old one left.
func (s Stream) Resume(text string, start int) (*Segment, error) {
	var p StreamPosition
	if err := json.Unmarshal([]byte(text), &p); err != nil {
		return nil, fmt.Errorf("the checkpoint's data position: %v", err)
	}
	n := s.N()
	if p.Samples != n {
		return nil, fmt.Errorf("the checkpoint was written reading shards of %d samples, these hold %d: resume on the same shards", p.Samples, n)
	}
	raw, err := base64.StdEncoding.DecodeString(p.Consumed)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint's data position: %v", err)
	}
	b, err := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	if err != nil || len(b) != 8*len(NewBitset(n)) {
		return nil, fmt.Errorf("the checkpoint's data position: a consumed set that does not read back (%v)", err)
	}
	before := NewBitset(n)
	for i := range before {
		for j := range 8 {
			before[i] |= uint64(b[8*i+j]) << (8 * j)
		}
	}
	if p.Size == s.Size && p.Batch == s.Batch {
		return s.Segment(p.Epoch, p.Start, before), nil
	}
	old := s
	old.Size, old.Batch = p.Size, p.Batch
	return s.Segment(p.Epoch, start, old.Segment(p.Epoch, p.Start, before).Consumed(p.Step-p.Start)), nil
}
