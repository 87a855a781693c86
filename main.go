// Command train is a distributed data-parallel trainer launched like any
// MPI program:
//
//	mpirun -np 2 ./train --model mlp --epochs 5
//
// Every rank takes its rank and size from MPI, trains on its shard of each
// global batch and averages gradients with an allreduce; rank 0 logs and
// writes checkpoints. Without mpirun it is a world of one rank.
//
// main only wires flags to the trainer and turns every failure into one
// line on stderr and a non-zero exit: a failure known to every rank ends
// the job normally; a failure on one rank aborts all of them.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"train/mpi"
	"train/runlog"
	"train/timeline"
	"train/trainer"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:  "train",
		Usage: "distributed data-parallel training under MPI",
		UsageText: "mpirun -np N train [options]     (or just: train [options], a world of one rank)\n" +
			"Every option can also be set by its TRAIN_* environment variable.",
		Flags:           trainFlags,
		Action:          trainAction,
		Commands:        []*cli.Command{benchCommand, checkpointCommand, dataCommand, doctorCommand, generateCommand, initCommand, planCommand, plotCommand, timelineCommand, tokenizeCommand},
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return fmt.Errorf("%v (see train --help)", err)
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main alone decides how to exit
	}
	oneLineUsage(app.Commands, "train")
	commandLine = args
	err := app.Run(hoistFlags(args, hoisted))
	if err == nil {
		return 0
	}
	var ex *exit
	if errors.As(err, &ex) {
		return ex.code
	}
	// Failed before MPI started (flag parsing): every rank has the same
	// error; the launcher's rank 0 alone prints it.
	if launcherRank() == 0 {
		fmt.Fprintf(stderr, "train: %v\n", err)
	}
	return 1
}

// oneLineUsage makes a usage error in any of cmds or their subcommands
// (a flag it does not define, a bad value) one line naming the command's
// help, as the app's own is, rather than the error and the whole help
// text.
func oneLineUsage(cmds []*cli.Command, path string) {
	for _, c := range cmds {
		name := path + " " + c.Name
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return fmt.Errorf("%v (see %s --help)", err, name)
		}
		oneLineUsage(c.Subcommands, name)
	}
}

// commandLine is run's arguments, for a command that must tell the
// options given on its command line from those its TRAIN_* variables set
// (givenFlags).
var commandLine []string

// givenFlags names the flags of cmd written on the command line, by their
// first name: after the command's name, or before it as the app's own
// (train --lr 0.1 init: the command reads the app's value through its
// context's lineage).
func givenFlags(cmd *cli.Command, args []string) []string {
	primary := map[string]string{}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			primary[n] = f.Names()[0]
		}
	}
	var out []string
	for _, a := range args[min(1, len(args)):] {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if p, ok := primary[n]; ok && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// refuseGiven fails on the first of names given on c's command line
// (not its TRAIN_* variable): an option the command would accept and
// then not act on. why says what the command does instead.
func refuseGiven(c *cli.Context, names []string, why string) error {
	for _, n := range givenFlags(c.Command, commandLine) {
		if slices.Contains(names, n) {
			return fmt.Errorf("--%s does nothing for %s: %s; drop it", n, commandPath(c), why)
		}
	}
	return nil
}

// commandPath is c's command as typed: "train bench step".
func commandPath(c *cli.Context) string {
	var names []string
	for _, x := range c.Lineage() {
		if x.Command != nil && x.Command.Name != "" {
			names = append([]string{x.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}

// exit carries an exit status whose message has been printed.
type exit struct{ code int }

func (e *exit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// launcherRank is this process's rank as mpirun or srun announce it in
// the environment, 0 if none does.
func launcherRank() int {
	for _, v := range []string{"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"} {
		if s := os.Getenv(v); s != "" {
			var r int
			fmt.Sscan(s, &r)
			return r
		}
	}
	return 0
}

// initCommand writes a model's initial weights.
var initCommand = &cli.Command{
	Name:      "init",
	Usage:     "write a model's initial parameters (from --seed) as a step-0 safetensors checkpoint",
	UsageText: "train init --model resnet --depth 20 [--data DIR | --data synthetic --synthetic-shape 3x32x32] -o FILE",
	Flags: append(trainFlags[:len(trainFlags):len(trainFlags)],
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "file to write"}),
	Action: func(c *cli.Context) error {
		// It takes the training flags so that the model is built as
		// training builds it, defaults and all; those that do not shape
		// the model or its initial values are refused, not ignored (their
		// TRAIN_* variables, set for the runs around it, are left alone).
		for _, n := range givenFlags(c.Command, commandLine) {
			if !initShapes[n] {
				return fmt.Errorf("--%s does nothing for train init, which writes a model's initial parameters (shaped by --model, its size options and --data's inputs, drawn from --seed): drop it", n)
			}
		}
		cfg, err := trainConfig(c)
		if err != nil {
			return err
		}
		return trainer.WriteInit(cfg, c.String("output"))
	},
}

// initShapes are the options train init acts on: the model, its sizes,
// the data that fixes its inputs, classes and vocabulary, and the seed.
var initShapes = map[string]bool{
	"output": true, modelFlag.Name: true, hiddenFlag.Name: true, depthFlag.Name: true, layersFlag.Name: true,
	headsFlag.Name: true, dimFlag.Name: true, contextFlag.Name: true, vocabFlag.Name: true, dataFlag.Name: true,
	synShape.Name: true, valDataFlag.Name: true, imgSizeFlag.Name: true, seedFlag.Name: true,
}

// plotCommand draws a run log's curves.
var plotCommand = &cli.Command{
	Name:  "plot",
	Usage: "draw a --log-file's loss, accuracy and throughput curves as a PNG; given several logs, their loss curves on shared axes",
	UsageText: "train plot run.jsonl -o curves.png [--width 1200 --height 900]\n" +
		"train plot ours.jsonl theirs.jsonl ... -o compare.png   (each run labelled by its start record's model)",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "curves.png", Usage: "PNG file to write"},
		&cli.IntFlag{Name: "width", Value: 1200, Usage: "pixels"},
		&cli.IntFlag{Name: "height", Value: 900, Usage: "pixels"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() < 1 {
			return fmt.Errorf("train plot takes one run log (written with --log-file), or several to compare")
		}
		if c.Int("width") < 100 || c.Int("height") < 100 {
			return fmt.Errorf("--width and --height: at least 100 pixels")
		}
		var runs []runlog.Run
		for _, path := range c.Args().Slice() {
			recs, err := runlog.ReadFile(path)
			if err != nil {
				return err
			}
			name := filepath.Base(path)
			for _, r := range recs {
				if r.Type == "start" && r.Model != "" {
					name = filepath.Base(path) + ": " + r.Model
				}
			}
			runs = append(runs, runlog.Run{Name: name, Recs: recs})
		}
		var err error
		if len(runs) == 1 {
			err = runlog.Plot(runs[0].Recs, c.String("output"), c.Int("width"), c.Int("height"))
		} else {
			err = runlog.Compare(runs, c.String("output"), c.Int("width"), c.Int("height"))
		}
		if err != nil {
			return fmt.Errorf("%s: %v", c.String("output"), err)
		}
		return nil
	},
}

// hoisted are the commands whose flags may follow their positional
// arguments, by path.
var hoisted = map[string]*cli.Command{
	"plot":                   plotCommand,
	"timeline merge":         timelineCommand.Subcommands[0],
	"timeline plot":          timelineCommand.Subcommands[1],
	"tokenize":               tokenizeCommand,
	"checkpoint consolidate": checkpointCommand.Subcommands[0],
	"data pack":              dataCommand.Subcommands[0],
	"data check":             dataCommand.Subcommands[1],
	"data bench":             dataCommand.Subcommands[2],
}

// timelineCommand joins the ranks' timeline files.
var timelineCommand = &cli.Command{
	Name:  "timeline",
	Usage: "timeline tools",
	Subcommands: []*cli.Command{{
		Name:      "merge",
		Usage:     "join the ranks' --timeline files into one trace for Perfetto or chrome://tracing",
		UsageText: "train timeline merge -o trace.json trace.rank0.json trace.rank1.json ...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "trace.json", Usage: "merged trace to write"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("train timeline merge: name the ranks' files (trace.rank*.json)")
			}
			return timeline.Merge(c.String("output"), c.Args().Slice())
		},
	}, {
		Name:  "plot",
		Usage: "draw one step of a --timeline trace as a PNG: a row per rank, a pipeline's forwards, backwards, sends and receives",
		UsageText: "train timeline plot -o step.png trace.json            (a merged trace)\n" +
			"train timeline plot -o step.png trace.rank*.json      (the ranks' files)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "timeline.png", Usage: "PNG file to write"},
			&cli.IntFlag{Name: "step", Value: -1, Usage: "the step to draw, counted from 0 as the trace's step spans are (default: the last but one every rank finished)"},
			&cli.IntFlag{Name: "width", Value: 1400, Usage: "pixels"},
			&cli.IntFlag{Name: "height", Value: 0, Usage: "pixels (default: 120 per rank, at least 300)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("train timeline plot: name a trace (train timeline merge's output, or the ranks' trace.rank*.json)")
			}
			var evs []timeline.Event
			for _, p := range c.Args().Slice() {
				e, err := timeline.Read(p)
				if err != nil {
					return err
				}
				evs = append(evs, e...)
			}
			h := c.Int("height")
			if h == 0 {
				h = 300
				for _, e := range evs {
					h = max(h, 120*(e.Pid+1)+120)
				}
			}
			if c.Int("width") < 100 || h < 100 {
				return fmt.Errorf("--width and --height: at least 100 pixels")
			}
			if err := timeline.Plot(evs, c.String("output"), c.Int("step"), c.Int("width"), h); err != nil {
				return fmt.Errorf("train timeline plot: %v", err)
			}
			return nil
		},
	}},
}

// trainAction trains: the root command.
func trainAction(c *cli.Context) error {
	cfg, err := trainConfig(c)
	if err != nil {
		return err
	}
	if cfg.Dist.Colocate && os.Getenv("OMPI_MCA_mpi_yield_when_idle") == "" {
		// A colocated server's thread shares its rank's core with the
		// worker; OpenMPI waits by spinning unless told to yield (read at
		// MPI_Init, so set before it). Measured: 4x faster steps.
		os.Setenv("OMPI_MCA_mpi_yield_when_idle", "1")
	}
	return withWorld(c, func(w *mpi.World) error {
		return trainer.Run(w, cfg, c.App.Writer, c.App.ErrWriter)
	})
}

// withWorld starts MPI, runs f on this rank, and ends the job: normally
// when every rank finished or every rank knows of the failure
// (trainer.JobError), by MPI_Abort when only this rank does (the others
// may be waiting in a collective) or when f panics.
func withWorld(c *cli.Context, f func(w *mpi.World) error) (err error) {
	stderr := c.App.ErrWriter
	w, err := mpi.Init()
	if err != nil {
		fmt.Fprintf(stderr, "train: %v\n", err)
		return &exit{1}
	}
	prefix := "train: "
	if w.Size() > 1 {
		prefix = fmt.Sprintf("train: rank %d: ", w.Rank())
	}
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "%sinternal error: %v\n", prefix, p)
			if os.Getenv("TRAIN_TRACEBACK") != "" {
				stderr.Write(debug.Stack())
			}
			w.Abort(2)
			err = &exit{2}
		}
	}()

	err = f(w)
	var je *trainer.JobError
	switch {
	case err == nil:
		if err := w.Finalize(); err != nil {
			fmt.Fprintf(stderr, "%s%v\n", prefix, err)
			return &exit{1}
		}
		return nil
	case errors.As(err, &je):
		if je.Own {
			fmt.Fprintf(stderr, "%s%v\n", prefix, je.Err)
		}
		w.Finalize()
		return &exit{1}
	default:
		fmt.Fprintf(stderr, "%s%v\n", prefix, err)
		if w.Size() > 1 {
			w.Abort(1)
		}
		w.Finalize()
		return &exit{1}
	}
}
