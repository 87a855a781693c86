package model

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Config says which network to build; it is stored in checkpoints so a
// resumed run can check it builds the same one.
type Config struct {
	Kind    string     `json:"kind"`            // "mlp", "cnn", "resnet", "resnet-cifar" or "gpt"
	Hidden  []int      `json:"hidden"`          // MLP hidden layer sizes
	Depth   int        `json:"depth,omitempty"` // ResNet depth: 18, 34, 50, 101, 152 (torchvision's), 6n+2 (CIFAR)
	Input   [3]int     `json:"input"`           // C, H, W of one sample (images)
	Classes int        `json:"classes"`         // outputs per position (gpt: the vocabulary)
	GPT     *GPTConfig `json:"gpt,omitempty"`   // gpt's sizes
}

// String is the config as JSON.
func (c Config) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// Kinds lists the models Build knows.
var Kinds = []string{"mlp", "cnn", "resnet", "resnet-cifar", "gpt"}

// The ResNet families.
const (
	Torchvision = "torchvision" // ImageNet ResNets, torchvision's layout and names
	CIFAR       = "cifar"       // He et al.'s CIFAR ResNets, depth 6n+2
)

// torchvisionBlocks are the blocks per stage of torchvision's ResNets.
var torchvisionBlocks = map[int][4]int{18: {2, 2, 2, 2}, 34: {3, 4, 6, 3}, 50: {3, 4, 6, 3}, 101: {3, 4, 23, 3}, 152: {3, 8, 36, 3}}

// ResNetFamily says which ResNet kind and depth name: --model resnet is
// torchvision's at 18, 34, 50, 101 and 152 and the CIFAR ResNet at the
// other depths 6n+2 (20, 32, 44, 56, 110, ...); resnet-cifar is always
// the CIFAR one. "" with the reason when neither has the depth (or kind
// is not a ResNet).
func ResNetFamily(kind string, depth int) (string, error) {
	cifar := depth >= 8 && (depth-2)%6 == 0
	_, tv := torchvisionBlocks[depth]
	switch {
	case kind == "resnet" && tv:
		return Torchvision, nil
	case (kind == "resnet" || kind == "resnet-cifar") && cifar:
		return CIFAR, nil
	case kind == "resnet":
		return "", fmt.Errorf("--depth %d: torchvision's ResNets have depth 18, 34, 50, 101 or 152, the CIFAR ResNets 6n+2 (20, 32, 44, 56, 110)", depth)
	case kind == "resnet-cifar":
		return "", fmt.Errorf("--depth %d: a CIFAR ResNet has depth 6n+2 (20, 32, 44, 56, 110)", depth)
	}
	return "", fmt.Errorf("model %q is not a ResNet", kind)
}

// Model is a network of layers applied in sequence, with its parameters and
// the activation buffers of the largest batch seen.
type Model struct {
	Config Config
	Params *Params
	Layers []Layer
	// OnGradReady, when set, is called during Backward each time a layer
	// with parameters is done, with the offset from which the gradient
	// buffer is final: [lo, Params.Len()). Parameters are laid out in
	// forward order, so lo only decreases during one Backward. The trainer
	// starts the allreduce of finished gradient buckets from it.
	OnGradReady func(lo int)
	// Gather and Release, when set, bracket every layer's Forward and
	// Backward with the layer's index (backward says which): ZeRO stage 3
	// gathers the layer's parameters (LayerRanges) from their shards just
	// before and frees them just after.
	Gather, Release func(layer int, backward bool)
	// Mode is shared with the layers: training or evaluation, and the
	// cross-replica reduction of synchronised BatchNorm.
	Mode *Mode
	// KeepActGrads keeps every layer's input gradient after Backward
	// (ActGrad), for tests that compare them; otherwise the layers between
	// the first and the last share two buffers in turn.
	KeepActGrads bool
	part         Part        // what of the network this model holds (part.go)
	all          []Layer     // every layer of the network, held or not (Init draws them all)
	regAt        []int       // per layer of all: its first tensor in Params.Registered (and one past the last)
	paramLo      []int       // per layer: offset of its first parameter, -1 if none
	positions    int         // output rows per sample: 1, or gpt's context
	wideLoss     bool        // gpt: the loss in C, its gradient over the logits
	acts         [][]float32 // acts[i] is layer i's input; acts[len] the logits
	grads        [][]float32 // gradients of acts, same shapes (two buffers in turn: ensure)
	batch        int
	sched        yielder // sched.go
}

// Build constructs the network cfg describes, with zero parameters (call
// Init or load them).
func Build(cfg Config) (*Model, error) { return BuildPart(cfg, Part{}) }

// BuildPart constructs the part of the network cfg describes that part
// holds (part.go), with zero parameters.
func BuildPart(cfg Config, part Part) (*Model, error) {
	m, err := layout(cfg, part, &Params{}, &Mode{Training: true})
	if err != nil {
		return nil, err
	}
	m.Params.Alloc()
	return m, nil
}

// layout constructs the layers of cfg into p (registering their tensors,
// or when p is allocated replaying its registrations), holding those of
// part.
func layout(cfg Config, part Part, p *Params, mode *Mode) (*Model, error) {
	m := &Model{Config: cfg, Params: p, Mode: mode, positions: 1, part: part}
	if !p.Alloced() {
		p.HoldIf(func() bool { return part.holds(len(m.all)) })
	}
	if cfg.Kind == "gpt" {
		if cfg.GPT == nil || cfg.Classes != cfg.GPT.Vocab {
			return nil, fmt.Errorf("model: gpt needs its sizes, with classes = the vocabulary")
		}
		if err := m.buildGPT(); err != nil {
			return nil, err
		}
		return m, nil
	}
	in := cfg.Input[0] * cfg.Input[1] * cfg.Input[2]
	if in <= 0 || cfg.Classes <= 0 {
		return nil, fmt.Errorf("model: bad input shape %v or %d classes", cfg.Input, cfg.Classes)
	}
	switch cfg.Kind {
	case "mlp":
		sizes := append(append([]int{in}, cfg.Hidden...), cfg.Classes)
		for i := 0; i+1 < len(sizes); i++ {
			if sizes[i+1] <= 0 {
				return nil, fmt.Errorf("model: hidden layer size %d must be positive", sizes[i+1])
			}
			before := m.Params.Len()
			m.add(NewLinear(m.Params, fmt.Sprintf("net.%d", 2*i), sizes[i], sizes[i+1]), before)
			if i+2 < len(sizes) {
				m.add(NewReLU(sizes[i+1]), m.Params.Len())
			}
		}
	case "cnn":
		if err := m.buildCNN(); err != nil {
			return nil, err
		}
	case "resnet", "resnet-cifar":
		family, err := ResNetFamily(cfg.Kind, cfg.Depth)
		if err != nil {
			return nil, err
		}
		if family == Torchvision {
			if err := m.buildTorchvisionResNet(); err != nil {
				return nil, err
			}
			break
		}
		m.buildResNet()
	default:
		return nil, fmt.Errorf("unknown model %q: choose one of %s", cfg.Kind, strings.Join(Kinds, ", "))
	}
	return m, nil
}

// buildCNN is the classic two-convolution network for 28x28 (or 32x32)
// images:
//
//	conv1 5x5 -> 32, pad 2, ReLU, 2x2 max pool
//	conv2 5x5 -> 64, pad 2, ReLU, 2x2 max pool
//	flatten, fc1 -> 128, ReLU, fc2 -> classes
//
// The pools halve the sides, rounding down: below 4x4 nothing would be
// left for fc1.
func (m *Model) buildCNN() error {
	c, h, w := m.Config.Input[0], m.Config.Input[1], m.Config.Input[2]
	if h < 4 || w < 4 {
		return fmt.Errorf("model: the CNN needs images of at least 4x4, not %dx%d (its two 2x2 max pools halve each side twice)", h, w)
	}
	p := m.Params
	m.add(NewToNHWC(c, h, w), p.Len())
	for i, out := range []int{32, 64} {
		before := p.Len()
		m.add(NewConv2D(p, fmt.Sprintf("conv%d", i+1), c, h, w, out, 5, 1, 2, true), before)
		m.add(NewReLU(h*w*out), p.Len())
		m.add(NewMaxPool2d(out, h, w, 2), p.Len())
		c, h, w = out, h/2, w/2
	}
	m.add(NewFlatten(c, h, w), p.Len())
	before := p.Len()
	m.add(NewLinear(p, "fc1", c*h*w, 128), before)
	m.add(NewReLU(128), p.Len())
	before = p.Len()
	m.add(NewLinear(p, "fc2", 128, m.Config.Classes), before)
	return nil
}

// buildResNet is the CIFAR ResNet of He et al. 2016 (section 4.2): a 3x3
// convolution to 16 channels with BatchNorm and ReLU, three stages of n =
// (depth-2)/6 BasicBlocks with 16, 32 and 64 channels (the second and
// third start with stride 2), global average pooling and a linear layer.
// Named as the README's PyTorch module: conv1, bn1, layer1..3.i, linear.
func (m *Model) buildResNet() {
	c, h, w := m.Config.Input[0], m.Config.Input[1], m.Config.Input[2]
	p := m.Params
	m.add(NewToNHWC(c, h, w), p.Len())
	before := p.Len()
	m.add(NewConv2D(p, "conv1", c, h, w, 16, 3, 1, 1, false), before)
	before = p.Len()
	m.add(NewBatchNorm2d(p, m.Mode, "bn1", 16, h, w).WithReLU(), before)
	c = 16
	n := (m.Config.Depth - 2) / 6
	for stage, out := range []int{16, 32, 64} {
		for i := range n {
			stride := 1
			if stage > 0 && i == 0 {
				stride = 2
			}
			before := p.Len()
			blk := NewBasicBlock(p, m.Mode, fmt.Sprintf("layer%d.%d", stage+1, i), c, h, w, out, stride)
			m.add(blk, before)
			c, h, w = out, (h+2-3)/stride+1, (w+2-3)/stride+1
		}
	}
	m.add(NewGlobalAvgPool(c, h, w), p.Len())
	before = p.Len()
	m.add(NewLinear(p, "linear", c, m.Config.Classes), before)
}

// buildTorchvisionResNet is torchvision's ResNet-18 to -152 (He et al.
// 2016's ImageNet networks, v1.5): a 7x7 stride-2 convolution to 64
// channels with BatchNorm and ReLU, a 3x3 stride-2 max pool, four stages
// of BasicBlocks (18, 34) or Bottlenecks (50 and up) at 64, 128, 256 and
// 512 channels (times 4 for Bottlenecks; stages 2 to 4 start with stride
// 2), global average pooling and a linear layer. The names are
// torchvision's (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, fc),
// so torchvision.models.resnet50() loads a checkpoint with strict=True
// when the input has 3 channels. Any image size the stride-32 stem and
// stages reduce to at least 1x1 works (the pooling is global).
func (m *Model) buildTorchvisionResNet() error {
	c, h, w := m.Config.Input[0], m.Config.Input[1], m.Config.Input[2]
	if h < 32 || w < 32 {
		return fmt.Errorf("model: torchvision's ResNet-%d needs images of at least 32x32, not %dx%d (the CIFAR ResNets take smaller ones: --model resnet-cifar)", m.Config.Depth, h, w)
	}
	p := m.Params
	m.add(NewToNHWC(c, h, w), p.Len())
	before := p.Len()
	stem := NewConv2D(p, "conv1", c, h, w, 64, 7, 2, 3, false)
	m.add(stem, before)
	h, w = stem.outH, stem.outW
	before = p.Len()
	m.add(NewBatchNorm2d(p, m.Mode, "bn1", 64, h, w).WithReLU(), before)
	pool := NewMaxPool2dStride(64, h, w, 3, 2, 1)
	m.add(pool, p.Len())
	c, h, w = 64, pool.oh, pool.ow
	blocks := torchvisionBlocks[m.Config.Depth]
	for stage, planes := range []int{64, 128, 256, 512} {
		for i := range blocks[stage] {
			stride := 1
			if stage > 0 && i == 0 {
				stride = 2
			}
			name := fmt.Sprintf("layer%d.%d", stage+1, i)
			before := p.Len()
			if m.Config.Depth >= 50 {
				b := NewBottleneck(p, m.Mode, name, c, h, w, planes, stride)
				m.add(b, before)
				c, h, w = Expansion*planes, b.conv2.outH, b.conv2.outW
			} else {
				b := newBasicBlock(p, m.Mode, name, c, h, w, planes, stride, "downsample")
				m.add(b, before)
				c, h, w = planes, b.conv1.outH, b.conv1.outW
			}
		}
	}
	m.add(NewGlobalAvgPool(c, h, w), p.Len())
	before = p.Len()
	m.add(NewLinear(p, "fc", c, m.Config.Classes), before)
	return nil
}

// FLOPs is the matrix-multiply work of one training sample (forward, the
// weight gradients, and the input gradients of every layer but the
// first): the useful FLOPs a step's speed is measured against.
func (m *Model) FLOPs() (forward, train int64) {
	first := true
	for _, l := range m.Layers {
		f, ok := l.(flopCounter)
		if !ok {
			continue
		}
		fwd, dw, dx := f.flops()
		forward += fwd
		train += fwd + dw
		if !first {
			train += dx
		}
		first = false
	}
	return forward, train
}

// add appends layer l, whose parameters (if any) were registered in
// m.Params from offset before on.
func (m *Model) add(l Layer, before int) {
	i := len(m.all)
	m.all = append(m.all, l)
	if m.regAt == nil {
		m.regAt = []int{0}
	}
	m.regAt = append(m.regAt, len(m.Params.Registered()))
	if !m.part.holds(i) {
		return
	}
	lo := -1
	if m.Params.Len() > before {
		lo = before
	}
	m.paramLo = append(m.paramLo, lo)
	m.Layers = append(m.Layers, l)
}

// Init draws the parameters from seed, PyTorch's default initialisation
// for each layer.
func (m *Model) Init(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x1a2b3c))
	for _, l := range m.all {
		if li, ok := l.(initializer); ok {
			li.init(rng)
		}
	}
}

// Classes is the number of outputs per position.
func (m *Model) Classes() int { return m.Config.Classes }

// Positions is the rows of Classes outputs one sample gives: 1 for the
// image models, the context for gpt (a prediction at every position).
func (m *Model) Positions() int { return m.positions }

func (m *Model) ensure(n int) {
	if n <= m.batch {
		return
	}
	m.batch = n
	// acts[0] is the caller's input; grads[0] is needed only by a
	// pipeline stage after the first, which sends it back.
	m.acts = append(m.acts[:0], nil)
	m.grads = append(m.grads[:0], nil)
	if !m.part.first() {
		m.grads[0] = make([]float32, n*m.Layers[0].InSize())
	}
	// Backward needs a layer's output gradient and its input gradient at
	// a time: the layers between take two buffers in turn (KeepActGrads:
	// one each).
	most := 0
	for _, l := range m.Layers[1:] {
		most = max(most, l.InSize())
	}
	turns := [2][]float32{make([]float32, n*most), make([]float32, n*most)}
	for i, l := range m.Layers[1:] {
		m.acts = append(m.acts, make([]float32, n*l.InSize()))
		if m.KeepActGrads {
			m.grads = append(m.grads, make([]float32, n*l.InSize()))
		} else {
			m.grads = append(m.grads, turns[i%2][:n*l.InSize()])
		}
	}
	last := m.Layers[len(m.Layers)-1].OutSize()
	m.acts = append(m.acts, make([]float32, n*last))
	if m.wideLoss { // the logits are the largest buffer: no second one
		m.grads = append(m.grads, m.acts[len(m.acts)-1])
	} else {
		m.grads = append(m.grads, make([]float32, n*last))
	}
}

// Forward runs the network on x (n, C*H*W; gpt: n x context token ids)
// and returns the logits (n * Positions, classes), valid until the next
// Forward. x must stay unchanged until Backward.
func (m *Model) Forward(x []float32, n int) []float32 {
	m.ensure(n)
	m.acts[0] = x[:n*m.Layers[0].InSize()]
	for i, l := range m.Layers {
		m.sched.yield()
		if m.Gather != nil {
			m.Gather(i, false)
		}
		l.Forward(m.acts[i+1], m.acts[i], n)
		if m.Release != nil {
			m.Release(i, false)
		}
	}
	return m.acts[len(m.Layers)][:n*m.OutSize()]
}

// InSize and OutSize are the values per sample this model (or pipeline
// stage) takes and gives: for the whole network, an input sample and
// Positions x Classes logits.
func (m *Model) InSize() int  { return m.Layers[0].InSize() }
func (m *Model) OutSize() int { return m.Layers[len(m.Layers)-1].OutSize() }

// InputGrad is the gradient of the last Forward's input that Backward
// wrote (n, InSize): a pipeline stage after the first sends it back.
func (m *Model) InputGrad(n int) []float32 { return m.grads[0][:n*m.InSize()] }

// LossGrad returns the buffer Backward reads the logits' gradient from
// (n * Positions, classes). For gpt it is the logits' own buffer: the
// loss's gradient overwrites them.
func (m *Model) LossGrad(n int) []float32 {
	m.ensure(n)
	return m.grads[len(m.Layers)][:n*m.OutSize()]
}

// Loss is the mean softmax cross-entropy of the logits (rows, Classes)
// against labels, and the rows whose first largest logit is the label's;
// with dlogits (LossGrad, or nil when only evaluating) it writes the
// gradient of the mean loss. The image models use SoftmaxCrossEntropy
// (float64 exp; their results stay bit for bit what they were); gpt the
// vectorised C kernel, for its 50257 classes.
func (m *Model) Loss(dlogits, logits []float32, labels []int32, rows int) (float64, int) {
	if !m.wideLoss {
		return SoftmaxCrossEntropy(dlogits, logits, labels, rows, m.Classes())
	}
	if rows == 0 {
		return 0, 0
	}
	loss, correct := xent(dlogits, logits, labels, rows, m.Classes(), float32(1/float64(rows)))
	return loss / float64(rows), correct
}

// Backward propagates the logits' gradient (in LossGrad) back through the
// layers of the last Forward, adding into Params.Grad.
func (m *Model) Backward(n int) {
	for i := len(m.Layers) - 1; i >= 0; i-- {
		var dx []float32
		if i > 0 || !m.part.first() {
			dx = m.grads[i]
		}
		m.sched.yield()
		if m.Gather != nil {
			m.Gather(i, true)
		}
		m.Layers[i].Backward(dx, m.grads[i+1], m.acts[i], m.acts[i+1], n)
		if m.Release != nil {
			m.Release(i, true)
		}
		if m.OnGradReady != nil && m.paramLo[i] >= 0 {
			m.OnGradReady(m.paramLo[i])
		}
	}
}

// LayerRanges is, per layer, the ranges [lo, hi) of the parameter buffer
// its Forward reads (its own tensors, and a tied head the embedding's
// table) and whether its Backward reads them too (an embedding's does
// not: it only scatters gradients): what ZeRO stage 3 gathers around it.
func (m *Model) LayerRanges() (ranges [][][2]int, backward []bool) {
	ranges = make([][][2]int, len(m.Layers))
	backward = make([]bool, len(m.Layers))
	for i, l := range m.Layers {
		if lo := m.paramLo[i]; lo >= 0 {
			hi := m.Params.Len()
			for j := i + 1; j < len(m.Layers); j++ {
				if m.paramLo[j] >= 0 {
					hi = m.paramLo[j]
					break
				}
			}
			ranges[i] = append(ranges[i], [2]int{lo, hi})
		}
		if t, ok := l.(interface{ tied() Tensor }); ok {
			w := t.tied()
			ranges[i] = append(ranges[i], [2]int{w.Offset, w.Offset + w.Size})
		}
		_, scatters := l.(*Embedding)
		backward[i] = len(ranges[i]) > 0 && !scatters
	}
	return ranges, backward
}
