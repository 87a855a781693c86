package trainer

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"train/flightrec"
	"train/model"
	"train/mpi"
	"train/optim"
)

// zeroExecutor is --zero 1, 2 or 3: ZeRO (Rajbhandari et al. 2020) among
// the data-parallel replicas, wrapping the CPU executor (or the
// accumulating one around it). Rank r of N owns the shard [r*S, (r+1)*S)
// of the flat buffers, S = ceil(Ψ/N) (the last shards shorter: padding is
// never stored), and holds the optimizer's state for it alone.
//
//   - Stage 1: each gradient bucket is reduce-scattered so that each rank
//     ends with the mean of its own shard, with the bits the allreduce
//     would give it (mpi.RingReduceScatterFloat32: the ring's first half,
//     and from 3 ranks on a move of the complete pieces to their owners);
//     the rank updates its shard; the ring's second half all-gathers the
//     parameters. The traffic of an allreduce, and at most 1/N of the
//     gradient more from 3 ranks on.
//   - Stage 2: the same, and a bucket's pages outside the own shard are
//     handed back to the kernel (MADV_DONTNEED) once it is reduced, so the
//     gradient held is the shard and the buckets in flight; a freed page
//     reads as zero, which is what the next step's accumulation wants.
//   - Stage 3: the parameters outside the own shard are freed as well, and
//     gathered layer by layer around each Forward and Backward
//     (Model.Gather, Model.Release), the next layer's gather prefetched by
//     a goroutine of its own while the current layer computes (FSDP). The
//     update then needs no all-gather; forward and backward each gather
//     the parameters once: 1.5 times an allreduce's traffic.
//
// The flat buffers keep their full length in address space: only the
// pages touched are memory, so the model's layers read their tensors where
// they always do.
type zeroExecutor struct {
	fl *flightBox // records its communicators
	Executor
	stage  int
	m      *model.Model
	opt    optim.Optimizer // over [lo, hi)
	n      int             // parameters
	rank   int
	size   int
	lo, hi int
	tw     *mpi.World // the training goroutine's: the norm, the parameters' all-gather
	worlds []*mpi.World
	// Stage 3.
	ranges   [][][2]int // per layer: what it reads
	bwd      []bool     // per layer: whether its backward reads them
	resident []bool     // per layer: gathered since the last release or update
	pf       *prefetcher
	err      error // the first failed gather
	// Working's sizes, in values: the largest gradient bucket, the
	// largest layer's parameters.
	maxBucket, maxLayer int
}

// shardOf is rank r's shard of n values over size ranks.
func shardOf(n, size, r int) (lo, hi int) {
	s := (n + size - 1) / size
	return min(r*s, n), min((r+1)*s, n)
}

func newZeroExecutor(s *Session, e Executor, r, d int) *zeroExecutor {
	n := s.Model.Params.Len()
	lo, hi := shardOf(n, d, r)
	return &zeroExecutor{Executor: e, stage: s.Cfg.Dist.Zero, m: s.Model, opt: s.Opt, n: n, rank: r, size: d, lo: lo, hi: hi, fl: s.flight}
}

// owned is the shard function over the range [a, b) of the flat buffer:
// each rank's part of it, counted from a.
func (z *zeroExecutor) owned(a, b int) func(int) (int, int) {
	return func(r int) (int, int) {
		lo, hi := shardOf(z.n, z.size, r)
		return min(max(lo, a), b) - a, min(max(hi, a), b) - a
	}
}

// Reducer makes ZeRO's communicators (collective: every rank builds its
// strategy here) and returns the buckets' reduce-scatter on w, which the
// communication goroutine runs.
func (z *zeroExecutor) Reducer(w *mpi.World, _ Algorithm, _ mpi.Compression) (bucketReducer, error) {
	tw, err := w.Dup()
	if err != nil {
		return nil, err
	}
	z.tw = tw
	z.worlds = append(z.worlds, tw)
	z.fl.record(tw, w.Flight().Name()+".zero")
	ranges, _ := z.m.LayerRanges()
	for _, rs := range ranges {
		n := 0
		for _, r := range rs {
			n += r[1] - r[0]
		}
		z.maxLayer = max(z.maxLayer, n)
	}
	if z.stage == 3 {
		gw, err := w.Dup()
		if err != nil {
			return nil, err
		}
		z.worlds = append(z.worlds, gw)
		z.fl.record(gw, w.Flight().Name()+".zero-gather")
		z.ranges, z.bwd = z.m.LayerRanges()
		z.resident = make([]bool, len(z.ranges))
		z.pf = newPrefetcher(func(i int) error { return z.gather(gw, i) })
		models := []*model.Model{z.m}
		if r, ok := z.Executor.(interface{ replicas() []*model.Model }); ok {
			models = r.replicas()
		}
		for _, m := range models {
			m.Gather, m.Release = z.gatherHook, z.releaseHook
		}
		z.releaseParams()
	}
	return &zeroBuckets{z: z, w: w}, nil
}

// ZeroGrad clears the gradient; from stage 2 on by freeing every page
// outside the own shard (they read as zero when backward next adds).
func (z *zeroExecutor) ZeroGrad() {
	if z.stage < 2 {
		z.Executor.ZeroGrad()
		return
	}
	g := z.m.Params.Grad
	zeroPages(g, 0, z.lo)
	model.Zero(g[z.lo:z.hi])
	zeroPages(g, z.hi, z.n)
}

func (z *zeroExecutor) Forward(x []float32, y []int32) error {
	if err := z.Executor.Forward(x, y); err != nil {
		return err
	}
	return z.err
}

func (z *zeroExecutor) Backward(ready func(lo int)) error {
	if err := z.Executor.Backward(ready); err != nil {
		return err
	}
	return z.err
}

// Update: the gradient's norm over every shard (for clipping, and so all
// ranks agree on a non-finite value), the own shard's update, then the
// parameters' all-gather (stages 1, 2) or the release of what backward
// gathered (stage 3).
func (z *zeroExecutor) Update(lr float64, t int, clip float64) (bool, error) {
	if z.pf != nil {
		if err := z.pf.wait(); err != nil {
			return false, err
		}
	}
	p := z.m.Params
	g := p.Grad[z.lo:z.hi]
	norm, err := z.norm()
	if err != nil {
		return false, err
	}
	finite := !math.IsNaN(norm) && !math.IsInf(norm, 0)
	if c := optim.ClipScale(norm, clip); clip > 0 && finite && c < 1 {
		optim.Scale(g, float32(c))
	}
	z.opt.Step(p.Data[z.lo:z.hi], g, float32(lr), t)
	if z.stage == 3 {
		z.releaseParams()
		return finite, nil
	}
	return finite, z.tw.RingAllgatherFloat32(p.Data, z.owned(0, z.n))
}

// norm is the whole gradient's norm from every rank's shard: on a grid
// the pipeline's count (each value once, over stages and tensor shards),
// otherwise the shards' squares summed over the replicas.
func (z *zeroExecutor) norm() (float64, error) {
	if e, ok := z.Executor.(interface {
		gradNorm(*mpi.World, int, int) (float64, error)
	}); ok {
		return e.gradNorm(z.tw, z.lo, z.hi)
	}
	sq := []float64{optim.SumSquares(z.m.Params.Grad[z.lo:z.hi])}
	if err := z.tw.AllreduceFloat64(sq, mpi.Sum); err != nil {
		return 0, err
	}
	return math.Sqrt(sq[0]), nil
}

// Settle: on a pipeline whose first and last stages each hold the tied
// token table, the wrapped executor sums the two stages' gradients of it,
// whole; the replicas hold only their shards of it after the
// reduce-scatter, so they all-gather it first (and from stage 2 on free
// the rest again after).
func (z *zeroExecutor) Settle() error {
	t, ok := z.m.TiedCopy()
	if !ok {
		return z.Executor.Settle()
	}
	g := z.m.Params.Grad
	a, b := t.Offset, t.Offset+t.Size
	if err := z.tw.RingAllgatherFloat32(g[a:b], z.owned(a, b)); err != nil {
		return err
	}
	err := z.Executor.Settle()
	if z.stage >= 2 {
		freeExcept(g, a, b, z.lo, z.hi)
	}
	return err
}

// ToHost: stage 3 holds only its shard and what a layer has gathered;
// the places that need the whole model (a single-file checkpoint, the
// replica check) gather it themselves (state_zero.go).
func (z *zeroExecutor) ToHost() error { return nil }

func (z *zeroExecutor) Describe() string {
	return fmt.Sprintf("%s; ZeRO stage %d over %d ranks, shard of %d parameters", z.Executor.Describe(), z.stage, z.size, z.hi-z.lo)
}

// Close leaves the executor it wraps to its own undo (Session.build).
func (z *zeroExecutor) Close() {}

// close stops the prefetcher and frees ZeRO's communicators.
func (z *zeroExecutor) close() {
	if z.pf != nil {
		z.pf.close()
		z.pf = nil
	}
	for _, w := range z.worlds {
		w.Free()
	}
	z.worlds = nil
}

// Held is what this rank holds for parameters, gradients and optimizer
// state, in bytes, counted from the buffers (the memory table of
// scripts/bench/zero.sh): stage 0's 4Ψ each and Adam's 8Ψ, or
// their shards.
func (z *zeroExecutor) Held() (params, grads, optState int64) {
	full, shard := int64(4*z.n), int64(4*(z.hi-z.lo))
	params, grads = full, full
	if z.stage >= 2 {
		grads = shard
	}
	if z.stage == 3 {
		params = shard
	}
	for _, b := range z.opt.State() {
		optState += int64(4 * len(b))
	}
	return params, grads, optState
}

// Working bounds, in bytes, what this rank holds beyond Held for a
// while: from stage 2 on, the gradient of the bucket being reduced and of
// what backward writes meanwhile (a bucket, or a layer larger than one:
// gradSync lets one bucket be in flight); at stage 3 also two layers'
// parameters, the one computing and the one prefetched. It is ZeRO's
// buffers, the fixed overhead its formulas leave out.
func (z *zeroExecutor) Working() int64 {
	if z.stage < 2 || z.size == 1 { // one rank: its shard is everything, nothing is freed
		return 0
	}
	w := z.maxBucket + max(z.maxBucket, z.maxLayer)
	if z.stage == 3 {
		w += 2 * z.maxLayer
	}
	return 4 * int64(w)
}

// gather all-gathers layer i's parameters on w.
func (z *zeroExecutor) gather(w *mpi.World, i int) error {
	data := z.m.Params.Data
	for _, r := range z.ranges[i] {
		if err := w.RingAllgatherFloat32(data[r[0]:r[1]], z.owned(r[0], r[1])); err != nil {
			return err
		}
	}
	return nil
}

// gatherHook is Model.Gather: layer i's parameters in place (prefetched
// when the previous call guessed it), then the next layer's gather
// started.
func (z *zeroExecutor) gatherHook(i int, backward bool) {
	if z.err != nil || (backward && !z.bwd[i]) || len(z.ranges[i]) == 0 {
		return
	}
	if !z.resident[i] {
		if err := z.pf.get(i); err != nil {
			z.err = err
			return
		}
		z.resident[i] = true
	}
	next, step := i+1, 1
	if backward {
		next, step = i-1, -1
	}
	for ; next >= 0 && next < len(z.ranges); next += step {
		if len(z.ranges[next]) > 0 && (!backward || z.bwd[next]) {
			break
		}
	}
	if next >= 0 && next < len(z.ranges) && !z.resident[next] && z.m.Mode.Training {
		z.pf.start(next)
	}
}

// releaseHook is Model.Release: layer i's gathered pages go back, except
// after the last layer's training forward (its backward comes next).
func (z *zeroExecutor) releaseHook(i int, backward bool) {
	if len(z.ranges[i]) == 0 || (!backward && i == len(z.ranges)-1 && z.m.Mode.Training) {
		return
	}
	data := z.m.Params.Data
	for _, r := range z.ranges[i] {
		freeExcept(data, r[0], r[1], z.lo, z.hi)
	}
	for j, rs := range z.ranges {
		if overlaps(rs, z.ranges[i]) {
			z.resident[j] = false
		}
	}
}

// releaseParams frees every parameter page outside the own shard.
func (z *zeroExecutor) releaseParams() {
	freeExcept(z.m.Params.Data, 0, z.n, z.lo, z.hi)
	clear(z.resident)
}

func overlaps(a, b [][2]int) bool {
	for _, x := range a {
		for _, y := range b {
			if x[0] < y[1] && y[0] < x[1] {
				return true
			}
		}
	}
	return false
}

// zeroBuckets reduce-scatters gradient buckets: the mean of each rank's
// part of the bucket lands on that rank; from stage 2 on the rest of the
// bucket's pages are freed.
type zeroBuckets struct {
	z *zeroExecutor
	w *mpi.World
}

func (b *zeroBuckets) use(bs []bucket) error {
	b.z.maxBucket = 0
	for _, k := range bs {
		b.z.maxBucket = max(b.z.maxBucket, k.hi-k.lo)
	}
	return nil
}
func (b *zeroBuckets) mark(bucket) {}
func (b *zeroBuckets) whole() bool { return false }
func (b *zeroBuckets) close()      {}

// inflight: from stage 2 on, one bucket reduced while backward fills the
// next, so the unreduced gradient held is about two buckets, not the
// whole gradient that a backward running ahead of a slower ring would
// leave behind.
func (b *zeroBuckets) inflight() int {
	if b.z.stage >= 2 {
		return 1
	}
	return 0
}
func (b *zeroBuckets) describe() string {
	return fmt.Sprintf("ring reduce-scatter (ZeRO-%d)", b.z.stage)
}

func (b *zeroBuckets) flightComm() *flightrec.Comm { return b.w.Flight() }

func (b *zeroBuckets) reduce(k bucket) error {
	z := b.z
	g := z.m.Params.Grad
	if err := b.w.RingReduceScatterFloat32(g[k.lo:k.hi], z.owned(k.lo, k.hi), mpi.Mean); err != nil {
		return err
	}
	if z.stage >= 2 {
		freeExcept(g, k.lo, k.hi, z.lo, z.hi)
	}
	return nil
}

// prefetcher runs stage 3's gathers on a goroutine of its own (one OS
// thread, its own communicator), one at a time: start queues layer i,
// get(i) waits for it (or gathers it now if another was queued).
type prefetcher struct {
	gather  func(int) error
	work    chan int
	done    chan error
	pending int // the layer queued, -1 for none
}

func newPrefetcher(gather func(int) error) *prefetcher {
	p := &prefetcher{gather: gather, work: make(chan int), done: make(chan error), pending: -1}
	go func() {
		runtime.LockOSThread()
		for i := range p.work {
			p.done <- p.run(i)
		}
	}()
	return p
}

// run gathers layer i; a panic becomes an error.
func (p *prefetcher) run(i int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ZeRO-3 gather of layer %d: %v", i, r)
		}
	}()
	return p.gather(i)
}

func (p *prefetcher) start(i int) {
	if p.pending >= 0 {
		return
	}
	p.pending = i
	p.work <- i
}

// wait waits for the queued gather, if any.
func (p *prefetcher) wait() error {
	if p.pending < 0 {
		return nil
	}
	p.pending = -1
	return <-p.done
}

func (p *prefetcher) get(i int) error {
	queued := p.pending
	if err := p.wait(); err != nil || queued == i {
		return err
	}
	p.pending = i
	p.work <- i
	return p.wait()
}

func (p *prefetcher) close() {
	p.wait()
	close(p.work)
}

// pageSize is the kernel's page.
var pageSize = os.Getpagesize()

// freePages hands the whole pages inside buf[lo:hi] back to the kernel
// and returns the range of elements they covered ([a, a) when none):
// they read as zero afterwards, and are memory again only when written.
func freePages(buf []float32, lo, hi int) (a, b int) {
	if hi <= lo {
		return lo, lo
	}
	base := uintptr(unsafe.Pointer(&buf[lo]))
	skip := (uintptr(pageSize) - base%uintptr(pageSize)) % uintptr(pageSize)
	bytes := (uintptr(4*(hi-lo)) - min(skip, uintptr(4*(hi-lo)))) / uintptr(pageSize) * uintptr(pageSize)
	if bytes == 0 {
		return lo, lo
	}
	p := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&buf[lo]), skip)), bytes)
	if err := syscall.Madvise(p, syscall.MADV_DONTNEED); err != nil {
		return lo, lo // kept: correct, only larger
	}
	a = lo + int(skip)/4
	return a, a + int(bytes)/4
}

// freeExcept frees the whole pages of buf[lo:hi] outside [keepLo, keepHi).
func freeExcept(buf []float32, lo, hi, keepLo, keepHi int) {
	freePages(buf, lo, min(hi, keepLo))
	freePages(buf, max(lo, keepHi), hi)
}

// zeroPages makes buf[lo:hi] zero, freeing its whole pages.
func zeroPages(buf []float32, lo, hi int) {
	a, b := freePages(buf, lo, hi)
	clear(buf[lo:a])
	clear(buf[b:hi])
}
