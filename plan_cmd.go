package main

import (
	"fmt"
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
		"--compute-ms is one step's compute on one node: take ms/step from `train bench step` at np=1.",
	Flags: []cli.Flag{
		modelFlag, hiddenFlag, depthFlag, batchFlag,
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
		ch, h, w, err := data.ParseShape(c.String("input"))
		if err != nil {
			return fmt.Errorf("--input %q: %v", c.String("input"), err)
		}
		m, err := model.Build(model.Config{Kind: c.String(modelFlag.Name), Hidden: c.IntSlice(hiddenFlag.Name), Depth: c.Int(depthFlag.Name),
			Input: [3]int{ch, h, w}, Classes: c.Int("classes")})
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
