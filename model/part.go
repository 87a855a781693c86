package model

import (
	"fmt"
	"strings"
)

// Part is the piece of a network one rank of a model-parallel grid holds:
// a pipeline stage, a run of consecutive layers. The zero Part is the
// whole network. Every rank builds the whole network's layers (cheap:
// layers allocate their activations on first use) but registers storage
// only for its own tensors, so parameter, gradient and optimizer memory
// fall as 1/P; the others are Absent, and Init still draws them, so each
// part's values are those np=1 draws.
type Part struct {
	Stage int   // this part's stage, 0-based
	Cuts  []int // the first layer of each stage: Cuts[0] = 0; nil or one entry: the whole network
	// Shard of Shards: tensor parallelism (gpt's blocks); 0 or 1 Shards:
	// whole blocks.
	Shard, Shards int
}

// Stages is the number of pipeline stages.
func (p Part) Stages() int { return max(len(p.Cuts), 1) }

// holds reports whether layer i of the network is on this part.
func (p Part) holds(i int) bool {
	if len(p.Cuts) <= 1 {
		return true
	}
	if i < p.Cuts[p.Stage] {
		return false
	}
	return p.Stage+1 == len(p.Cuts) || i < p.Cuts[p.Stage+1]
}

// first reports whether the part takes the network's input.
func (p Part) first() bool { return len(p.Cuts) <= 1 || p.Stage == 0 }

// First and Last report whether this model takes the network's input and
// whether it gives the logits (and so computes the loss).
func (m *Model) First() bool { return m.part.first() }
func (m *Model) Last() bool  { return len(m.part.Cuts) <= 1 || m.part.Stage == len(m.part.Cuts)-1 }

// Layout is the whole network cfg describes, without storage: its layers'
// sizes, names and costs, for cutting it into stages and planning.
func Layout(cfg Config) (*Model, error) { return LayoutPart(cfg, Part{}) }

// LayoutPart is part of the network without storage: its tensors' names
// and offsets (a checkpoint gathered from the parts places them by it).
func LayoutPart(cfg Config, part Part) (*Model, error) {
	return layout(cfg, part, &Params{}, &Mode{Training: true})
}

// LayerCost is layer i's estimated training work per sample: its matrix
// products' FLOPs (forward, weight and input gradients), plus the values
// it reads and writes for the layers without any (activations, norms).
func (m *Model) LayerCost(i int) float64 {
	l := m.all[i]
	c := float64(l.InSize() + l.OutSize())
	if f, ok := l.(flopCounter); ok {
		fwd, dw, dx := f.flops()
		c += float64(fwd + dw + dx)
	}
	return c
}

// LayerNames names each layer of the network by its first tensor (or its
// type, for a layer without parameters), for the log and train plan.
func (m *Model) LayerNames() []string {
	names := make([]string, len(m.all))
	reg := m.Params.Registered()
	for i, l := range m.all {
		names[i] = strings.ToLower(strings.TrimPrefix(fmt.Sprintf("%T", l), "*model."))
		if lo, hi := m.layerTensors(i); lo < hi {
			// The tensors' common dotted prefix: layer1.0, transformer.h.3.
			parts := strings.Split(reg[lo].Name, ".")
			k := len(parts) - 1
			for _, t := range reg[lo+1 : hi] {
				o := strings.Split(t.Name, ".")
				j := 0
				for j < k && j < len(o) && o[j] == parts[j] {
					j++
				}
				k = j
			}
			names[i] = strings.Join(parts[:max(k, 1)], ".")
		}
	}
	return names
}

// layerTensors is the range of Params.Registered that layer i registered.
func (m *Model) layerTensors(i int) (lo, hi int) {
	if m.regAt == nil {
		return 0, 0
	}
	return m.regAt[i], m.regAt[i+1]
}

// LayerParams is the number of parameters of layer i (its registered
// tensors, buffers included), for train plan.
func (m *Model) LayerParams(i int) int {
	lo, hi := m.layerTensors(i)
	n := 0
	for _, t := range m.Params.Tensors[lo:hi] {
		n += t.Size
	}
	return n
}

// LayerOut is layer i's output per sample, in values: what crosses a
// pipeline cut after it.
func (m *Model) LayerOut(i int) int { return m.all[i].OutSize() }

// AllLayers is the number of layers of the whole network.
func (m *Model) AllLayers() int { return len(m.all) }

// Balance cuts the network's layers into p stages of about equal cost
// (LayerCost): the cut that minimises the costliest stage, found by
// dynamic programming over the prefix sums. Each stage gets at least one
// layer.
func (m *Model) Balance(p int) ([]int, error) {
	n := len(m.all)
	if p < 1 || p > n {
		return nil, fmt.Errorf("--pipeline %d: the %s model has %d layers, and each stage needs at least one; use at most %d stages", p, m.Config.Kind, n, n)
	}
	sum := make([]float64, n+1)
	for i := range n {
		sum[i+1] = sum[i] + m.LayerCost(i)
	}
	// best[k][i]: the least possible costliest stage cutting layers [0, i)
	// into k stages; from[k][i] where the last of them starts.
	best := make([][]float64, p+1)
	from := make([][]int, p+1)
	for k := range best {
		best[k], from[k] = make([]float64, n+1), make([]int, n+1)
		for i := range best[k] {
			best[k][i] = -1
		}
	}
	best[0][0] = 0
	for k := 1; k <= p; k++ {
		for i := k; i <= n; i++ {
			for j := k - 1; j < i; j++ {
				if best[k-1][j] < 0 {
					continue
				}
				c := max(best[k-1][j], sum[i]-sum[j])
				if best[k][i] < 0 || c < best[k][i] {
					best[k][i], from[k][i] = c, j
				}
			}
		}
	}
	cuts := make([]int, p)
	for k, i := p, n; k > 0; k-- {
		i = from[k][i]
		cuts[k-1] = i
	}
	return cuts, nil
}

// CutsOf turns --stages' layer counts per stage into cuts.
func (m *Model) CutsOf(counts []int) ([]int, error) {
	n, sum := len(m.all), 0
	cuts := make([]int, len(counts))
	for i, c := range counts {
		if c < 1 {
			return nil, fmt.Errorf("--stages %s: stage %d has %d layers; each needs at least one", joinInts(counts), i, c)
		}
		cuts[i] = sum
		sum += c
	}
	if sum != n {
		return nil, fmt.Errorf("--stages %s: the counts add up to %d layers, and the %s model has %d (%s); give counts that add up to %d",
			joinInts(counts), sum, m.Config.Kind, n, strings.Join(m.LayerNames(), " "), n)
	}
	return cuts, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// Replica builds a second set of this model's layers over the same
// parameters, gradients and buffers, with activations of its own: a
// pipeline stage keeps one per micro-batch in flight.
func (m *Model) Replica() *Model {
	m.Params.Replay()
	r, err := layout(m.Config, m.part, m.Params, m.Mode)
	m.Params.EndReplay()
	if err != nil {
		panic("model: a replica of a built model: " + err.Error())
	}
	return r
}

// TiedCopy is, on a pipeline whose first and last stages are apart, the
// token table this stage holds of the two: its gradient is summed with
// the other's each step so both stay the same.
func (m *Model) TiedCopy() (Tensor, bool) {
	if m.Config.Kind != "gpt" || m.First() == m.Last() {
		return Tensor{}, false
	}
	for _, t := range m.Params.Tensors {
		if t.Name == "transformer.wte.weight" {
			return t, true
		}
	}
	return Tensor{}, false
}

// holder is a layer that keeps activations of its own for backward.
type holder interface{ heldBytes() int }

// ActivationBytes is what this model holds for the largest batch it has
// run, between Forward and Backward: the layers' outputs and their
// gradients, and what the layers keep inside (a block's intermediates,
// the attention's probabilities). The input, the caller's, is not counted.
func (m *Model) ActivationBytes() int {
	n := 0
	seen := map[*float32]bool{}
	for _, bufs := range [][][]float32{m.acts[1:], m.grads} {
		for _, b := range bufs {
			if len(b) > 0 && !seen[&b[0]] {
				seen[&b[0]] = true
				n += 4 * cap(b) // the gradients' buffers are shared, each as large as the largest
			}
		}
	}
	for _, l := range m.Layers {
		if h, ok := l.(holder); ok {
			n += h.heldBytes()
		}
	}
	return n + m.Mode.scratch.bytes()
}

func floats(bufs ...[]float32) int {
	n := 0
	for _, b := range bufs {
		n += 4 * len(b)
	}
	return n
}

func (b *GPTBlock) heldBytes() int {
	return floats(b.a1, b.at, b.x1, b.a2, b.hid, b.g, b.d1, b.d2, b.dh, b.dg) + b.attn.heldBytes() + b.ln1.heldBytes() + b.ln2.heldBytes()
}
func (a *Attention) heldBytes() int  { return floats(a.qkv, a.dqkv, a.p, a.o, a.do) }
func (l *LayerNorm) heldBytes() int  { return floats(l.mean, l.rstd) }
func (l *MaxPool2d) heldBytes() int  { return 4 * len(l.arg) }
func (b *BasicBlock) heldBytes() int { return floats(b.c1, b.c2, b.s1) + b.bc.heldBytes() }
