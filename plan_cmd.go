package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"train/data"
	"train/model"
	"train/plan"
)

// planCommand is `train plan`: the alpha-beta cost model of package plan,
// run on the model the flags describe. It needs no MPI and no data.
var planCommand = &cli.Command{
	Name:  "plan",
	Usage: "predict step time and scaling efficiency of each strategy on N nodes (alpha-beta cost model)",
	UsageText: "train plan --model resnet --depth 20 --compute-ms 325 --nodes 2,8,64,512 --link-gbps 25 --latency-us 5\n" +
		"train plan --grid --model gpt2-medium --batch-size 32 --gflops 50 --nodes 4 --ranks-per-node 8 --mem-gb 8 --state-copies 2\n" +
		"--compute-ms is one step's compute on one node: take ms/step from `train bench step` at np=1.\n" +
		"--grid: every data x pipeline x tensor grid of the ranks, with its micro-batches, allreduce, memory per rank and step time.",
	Flags: []cli.Flag{
		modelFlag, hiddenFlag, depthFlag, batchFlag, layersFlag, headsFlag, dimFlag, contextFlag, vocabFlag,
		&cli.BoolFlag{Name: "grid", Usage: "plan model parallelism: rank each (D, P, T) grid of nodes x ranks-per-node ranks, recommend one, its --micro-batches and --allreduce"},
		&cli.Float64Flag{Name: "gflops", Usage: "--grid: a rank's sustained GFLOP/s, to estimate --compute-ms from the model's FLOPs (when the model is too big to measure on one rank)"},
		&cli.Float64Flag{Name: "mem-gb", Usage: "--grid: memory per rank, GB; grids that need more are ranked last (0: no limit)"},
		&cli.StringFlag{Name: "input", Value: "1x28x28", Usage: "image shape CxHxW the model is sized for"},
		&cli.IntFlag{Name: "classes", Value: 10, Usage: "outputs"},
		&cli.Float64Flag{Name: "compute-ms", Usage: "measured compute time of one step on one node, in ms (required)"},
		&cli.StringFlag{Name: "nodes", Value: "2,8,64,512", Usage: "node counts, comma-separated"},
		&cli.Float64Flag{Name: "link-gbps", Value: 25, Usage: "each node's link, Gbit/s per direction"},
		&cli.Float64Flag{Name: "latency-us", Value: 5, Usage: "latency per message, microseconds"},
		&cli.Float64Flag{Name: "reduce-gbs", Value: 40, Usage: "how fast a node adds float32 data, GB/s (go test -bench BenchmarkAdd ./mpi)"},
		&cli.IntFlag{Name: "servers", Value: 1, Usage: "parameter servers (separate nodes) for ps-sync and ps-async"},
		&cli.IntFlag{Name: "sync-every", Value: 8, Usage: "local-sgd: steps between averages"},
		&cli.Float64Flag{Name: "state-copies", Value: 1, Usage: "optimizer state local-sgd averages, in copies of the parameters (SGD momentum 1, Adam 2, none 0)"},
		&cli.Float64Flag{Name: "intra-gbs", Value: 0, Usage: "with several ranks per node: GB/s of a collective between them (shared memory; 0: --reduce-gbs)"},
		&cli.StringFlag{Name: "compress", Value: "none", Usage: "ring and hier: gradients as fp16 or bf16 on the wire (half the bytes, plus --convert-gbs), or none"},
		&cli.Float64Flag{Name: "convert-gbs", Value: 0, Usage: "with --compress: GB/s of float32 a node encodes and decodes (train bench allreduce --compress fp16 prints it); 0: free"},
		&cli.IntFlag{Name: "ranks-per-node", Value: 1, Usage: "ranks per node (a hierarchical allreduce is predicted when above 1; parameter servers only at 1)"},
		&cli.BoolFlag{Name: "csv", Usage: "machine-readable output"},
	},
	Action: func(c *cli.Context) error {
		if c.Bool("grid") {
			return planGrid(c)
		}
		for _, f := range []string{"gflops", "mem-gb"} {
			if c.IsSet(f) {
				return fmt.Errorf("--%s is used with --grid only", f)
			}
		}
		cfg, err := planModel(c)
		if err != nil {
			return err
		}
		m, err := model.Build(cfg)
		if err != nil {
			return err
		}
		nodes, err := parseNodes(c.String("nodes"))
		if err != nil {
			return err
		}
		bytes := 4 * float64(m.Params.Len())
		job := plan.Job{ParamBytes: bytes, StateBytes: c.Float64("state-copies") * bytes, ComputeS: c.Float64("compute-ms") / 1e3,
			BatchPerRank: c.Int(batchFlag.Name), Servers: c.Int("servers"), SyncEvery: c.Int("sync-every"), RanksPerNode: c.Int("ranks-per-node")}
		net := plan.Network{LatencyS: c.Float64("latency-us") / 1e6, BytesPerS: c.Float64("link-gbps") * 1e9 / 8, ReduceBytesS: c.Float64("reduce-gbs") * 1e9, IntraBytesS: c.Float64("intra-gbs") * 1e9,
			ConvertBytesS: c.Float64("convert-gbs") * 1e9}
		switch c.String("compress") {
		case "none":
		case "fp16", "bf16":
			job.Wire = 0.5
		default:
			return fmt.Errorf("--compress %q: choose none, fp16 or bf16", c.String("compress"))
		}
		if net.ConvertBytesS < 0 {
			return fmt.Errorf("--convert-gbs %v: must not be negative", c.Float64("convert-gbs"))
		}
		if err := job.Validate(); err != nil {
			return err
		}
		if err := net.Validate(); err != nil {
			return err
		}
		if job.SyncEvery < 1 || job.StateBytes < 0 {
			return fmt.Errorf("--sync-every must be at least 1 and --state-copies not negative")
		}
		out := c.App.Writer
		if c.Bool("csv") {
			fmt.Fprintln(out, "nodes,strategy,workers,comm_ms,step_ms,efficiency,samples_per_s")
			for _, p := range nodes {
				for _, pr := range plan.Predict(net, job, p) {
					fmt.Fprintf(out, "%d,%s,%d,%.4f,%.4f,%.4f,%.1f\n", p, pr.Strategy, pr.Workers, pr.CommS*1e3, pr.StepS*1e3, pr.Efficiency, pr.SamplesS)
				}
			}
			return nil
		}
		fmt.Fprintf(out, "# train plan: %s, %d parameters (%.2f MB of gradients), compute %.3g ms/step, batch %d per worker\n",
			m.Config.Kind, m.Params.Len(), bytes/1e6, job.ComputeS*1e3, job.BatchPerRank)
		fmt.Fprintf(out, "# link %.4g Gbit/s, latency %.4g us, reduction %.4g GB/s; %d parameter server(s); local-sgd every %d steps; no overlap assumed\n",
			c.Float64("link-gbps"), c.Float64("latency-us"), c.Float64("reduce-gbs"), job.Servers, job.SyncEvery)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "nodes\tstrategy\tworkers\tcomm ms\tstep ms\tefficiency\tsamples/s\t")
		for _, p := range nodes {
			for _, pr := range plan.Predict(net, job, p) {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%.3f\t%.3f\t%.3f\t%.0f\t\n", p, pr.Strategy, pr.Workers, pr.CommS*1e3, pr.StepS*1e3, pr.Efficiency, pr.SamplesS)
			}
		}
		return tw.Flush()
	},
}

// planModel is the model the flags describe, sized for --input and
// --classes (gpt: its flags or a GPT-2 preset, GPT-2's vocabulary unless
// --vocab).
func planModel(c *cli.Context) (model.Config, error) {
	kind := c.String(modelFlag.Name)
	_, preset := model.GPTPresets[kind]
	if !preset && kind != "gpt" {
		for _, f := range []string{"layers", "heads", "dim", "context", "vocab"} {
			if c.IsSet(f) {
				return model.Config{}, fmt.Errorf("--%s sizes a gpt; --model %s does not take it", f, kind)
			}
		}
	}
	if preset || kind == "gpt" {
		g := model.GPTConfig{Layers: c.Int("layers"), Heads: c.Int("heads"), Dim: c.Int("dim"), Context: c.Int("context"), Vocab: c.Int("vocab")}
		gptPreset(kind, c.IsSet, &g.Layers, &g.Heads, &g.Dim, &g.Context)
		if g.Vocab == 0 {
			g.Vocab = 50257
		}
		g.VocabPadded = model.PadVocab(g.Vocab)
		if err := g.Validate(); err != nil {
			return model.Config{}, err
		}
		return model.Config{Kind: "gpt", Classes: g.Vocab, GPT: &g}, nil
	}
	ch, h, w, err := data.ParseShape(c.String("input"))
	if err != nil {
		return model.Config{}, fmt.Errorf("--input %q: %v", c.String("input"), err)
	}
	return model.Config{Kind: kind, Hidden: c.IntSlice(hiddenFlag.Name), Depth: c.Int(depthFlag.Name),
		Input: [3]int{ch, h, w}, Classes: c.Int("classes")}, nil
}

// planGrid is train plan --grid: package plan's grid model on the layers
// of the model the flags describe (laid out, never allocated, so a model
// too big for this machine can be planned).
func planGrid(c *cli.Context) error {
	for _, f := range []string{"servers", "sync-every", "compress", "convert-gbs", "csv"} {
		if c.IsSet(f) {
			return fmt.Errorf("--%s is not used with --grid (its grids are allreduce replicas of pipeline stages and tensor shards)", f)
		}
	}
	cfg, err := planModel(c)
	if err != nil {
		return err
	}
	m, err := model.Layout(cfg)
	if err != nil {
		return err
	}
	_, train := m.FLOPs()
	batch := c.Int(batchFlag.Name)
	compute := c.Float64("compute-ms") / 1e3
	switch {
	case c.IsSet("compute-ms") && c.IsSet("gflops"):
		return fmt.Errorf("--compute-ms and --gflops: give one (a measured step, or a rate to estimate it from the model's FLOPs)")
	case c.IsSet("gflops") && c.Float64("gflops") > 0:
		compute = float64(train) * float64(batch) / (c.Float64("gflops") * 1e9)
	case compute <= 0:
		return fmt.Errorf("--grid needs --compute-ms (one step at --batch-size on one rank) or --gflops (a rank's sustained GFLOP/s)")
	}
	nodes, err := parseNodes(c.String("nodes"))
	if err != nil {
		return err
	}
	gm := plan.GridModel{Batch: batch, ComputeS: compute, StateCopies: c.Float64("state-copies"), Balance: m.Balance}
	if cfg.Kind == "resnet" || cfg.Kind == "resnet-cifar" || cfg.Kind == "cnn" {
		gm.MinMicro = 2 // BatchNorm's statistics are per micro-batch
	}
	var ctx, dim float64
	if g := cfg.GPT; g != nil {
		gm.Heads, ctx, dim = g.Heads, float64(g.Context), float64(g.Dim)
	}
	names := m.LayerNames()
	for i := range m.AllLayers() {
		l := plan.GridLayer{Cost: m.LayerCost(i), ParamBytes: 4 * float64(m.LayerParams(i)), OutBytes: 4 * float64(m.LayerOut(i))}
		if cfg.GPT != nil && strings.HasPrefix(names[i], "transformer.h.") {
			// Korthikanti et al. (2022), eq. 2 with tensor parallelism,
			// in float32 (their bytes are fp16's, so twice): per sample
			// 2 s h (10 + 24/t) + 2 * 5 a s^2 / t.
			a := float64(gm.Heads)
			l.Tensor, l.TensorBytes = true, 4*ctx*dim
			l.HeldBytes, l.HeldSplitBytes = 20*ctx*dim, 48*ctx*dim+10*a*ctx*ctx
		} else {
			l.HeldBytes = 2 * l.OutBytes // its input and its output
		}
		gm.Layers = append(gm.Layers, l)
	}
	net := plan.Network{LatencyS: c.Float64("latency-us") / 1e6, BytesPerS: c.Float64("link-gbps") * 1e9 / 8, ReduceBytesS: c.Float64("reduce-gbs") * 1e9, IntraBytesS: c.Float64("intra-gbs") * 1e9}
	if err := net.Validate(); err != nil {
		return err
	}
	if batch < 1 || c.Float64("mem-gb") < 0 || c.Float64("state-copies") < 0 {
		return fmt.Errorf("--batch-size must be positive, --mem-gb and --state-copies not negative")
	}
	out := c.App.Writer
	fmt.Fprintf(out, "# train plan --grid: %s, %d layers, %d parameters, %.1f GFLOP per training sample; batch %d per replica, one step on one rank %.4g ms\n",
		cfg.Kind, m.AllLayers(), m.Params.Total(), float64(train)/1e9, batch, compute*1e3)
	fmt.Fprintf(out, "# link %.4g Gbit/s, latency %.4g us, within a node %.4g GB/s; memory per rank %s; optimizer state %.3g copies; 1F1B; no overlap of the gradient allreduce assumed\n",
		c.Float64("link-gbps"), c.Float64("latency-us"), max(net.IntraBytesS, net.ReduceBytesS)/1e9, memLimit(c.Float64("mem-gb")), gm.StateCopies)
	for _, n := range nodes {
		cl := plan.Cluster{Nodes: n, RanksPerNode: max(c.Int("ranks-per-node"), 1), Net: net, MemBytes: c.Float64("mem-gb") * 1e9}
		grids, err := plan.Grids(gm, cl)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n## %d node(s) x %d rank(s)\n", n, cl.RanksPerNode)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "D\tP\tT\tM\tglobal batch\tbubble\tcompute ms\ttensor ms\tpipe ms\tallreduce ms\tstep ms\tsamples/s\tmem/rank GB\tstage traffic MB\ttensor calls\t")
		for _, g := range grids {
			mem := fmt.Sprintf("%.2f", g.MemBytes/1e9)
			if !g.Fits {
				mem += " (over)"
			}
			ar := "-"
			if g.D > 1 {
				ar = fmt.Sprintf("%.2f %s", g.DataS*1e3, g.Allreduce)
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.0f%%\t%.2f\t%.2f\t%.3f\t%s\t%.2f\t%.3g\t%s\t%.2f\t%d\t\n",
				g.D, g.P, g.T, g.M, g.D*batch, 100*g.Bubble, g.ComputeS*1e3, g.TensorS*1e3, g.PipeS*1e3, ar, g.StepS*1e3, g.SamplesS, mem, g.PipeBytes/1e6, g.TensorCalls)
		}
		tw.Flush()
		best := grids[0]
		if !best.Fits {
			fmt.Fprintf(out, "recommended: none fits %s per rank; the smallest needs %.2f GB\n", memLimit(c.Float64("mem-gb")), minMem(grids)/1e9)
			continue
		}
		cmd := fmt.Sprintf("mpirun -np %d ./train --model %s", best.D*best.P*best.T, c.String(modelFlag.Name))
		if best.P > 1 {
			cmd += fmt.Sprintf(" --pipeline %d --schedule 1f1b", best.P)
		}
		if best.M > 1 {
			cmd += fmt.Sprintf(" --micro-batches %d", best.M)
		}
		if best.T > 1 {
			cmd += fmt.Sprintf(" --tensor-parallel %d", best.T)
		}
		if best.D > 1 {
			cmd += " --allreduce " + best.Allreduce
		}
		fmt.Fprintf(out, "recommended: D=%d P=%d T=%d: %s --batch-size %d\n", best.D, best.P, best.T, cmd, batch)
	}
	return nil
}

func memLimit(gb float64) string {
	if gb <= 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.4g GB", gb)
}

func minMem(gs []plan.GridPlan) float64 {
	m := math.Inf(1)
	for _, g := range gs {
		m = math.Min(m, g.MemBytes)
	}
	return m
}

func parseNodes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--nodes %q: want positive node counts, comma-separated (2,8,64)", s)
		}
		out = append(out, n)
	}
	return out, nil
}
