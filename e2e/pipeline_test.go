package e2e

import (
	stdpng "image/png"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"train/timeline"
)

// TestPipeline: a model cut into pipeline stages trains as np=1 with the
// same global batch and micro-batches does (issue 16, must-show 1), within
// 1e-5 after 20 steps, every tensor of the gathered checkpoint (parameters
// and optimizer state):
//   - MLP and ResNet at (D,P,T) = (1,2,1), (1,4,1), (2,2,1), M >= 2P (8, or 4 per replica at D = 2);
//   - both schedules (1f1b by default, gpipe on some grids), and an
//     uneven --stages cut;
//   - GPT at (1,2,1), (1,4,1), (2,2,1) (its tied table on the first and
//     last stage, their gradients summed).
//
// With D = 1 the stages see exactly the micro-batches of np=1, BatchNorm
// included, so the running statistics are compared too; with D = 2 the
// ResNet runs --bn local (each micro-batch's own statistics, as at np=1)
// and its running statistics, updated per micro-batch and averaged at the
// end, are left out.
func TestPipeline(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	mlp := []string{"--model", "mlp", "--hidden", "32,16", "--data", "synthetic", "--synthetic-shape", "1x8x8", "--synthetic-samples", "640",
		"--max-steps", "20", "--log-every", "5"}
	// lr 0.005: at the default 0.05 the ResNet on random images is chaotic
	// enough that the D-way mean's rounding (np=1 sums in another order)
	// grows past 1e-5 within 20 steps, pipeline or not.
	res := append(append([]string{}, smallResNet...), "--max-steps", "20", "--bn", "local", "--lr", "0.005")
	gpt := append(smallGPT(bytesCorpus(t, dir)), "--max-steps", "20")
	type grid struct {
		np, d, p int
		extra    []string
	}
	grids := []grid{
		{2, 1, 2, nil},
		{4, 1, 4, []string{"--schedule", "gpipe"}},
		{4, 2, 2, nil},
	}
	for _, m := range []struct {
		name string
		args []string
		same func(t *testing.T, what string, want, got map[string][]float32)
	}{
		{"mlp", mlp, func(t *testing.T, what string, want, got map[string][]float32) { sameTensors(t, what, want, got, 1e-5) }},
		{"resnet", res, func(t *testing.T, what string, want, got map[string][]float32) { sameTensors(t, what, want, got, 1e-5) }},
		{"gpt", gpt, func(t *testing.T, what string, want, got map[string][]float32) { gptSame(t, what, want, got, 32) }},
	} {
		_, ref := trainAt(t, 1, 1, dir, m.name+"-ref", 20, append(m.args, "--batch-size", "16", "--micro-batches", "8")...)
		for _, g := range grids {
			// Each replica's micro-batches are 2 samples, as np=1's 8 of 16.
			args := append(append(append([]string{}, m.args...), "--batch-size", itoa(16/g.d), "--micro-batches", itoa(8/g.d), "--pipeline", itoa(g.p)), g.extra...)
			name := m.name + "-" + itoa(g.d) + "x" + itoa(g.p) + "x1"
			r, got := trainAt(t, g.np, g.d, dir, name, 20, args...)
			want := ref
			if g.d > 1 && m.name == "resnet" {
				want, got = withoutRunningStats(want), withoutRunningStats(got)
			}
			m.same(t, name+" "+strings.Join(g.extra, " ")+" against np=1", want, got)
			if !strings.Contains(r.stdout, "pipeline stage 0 of "+itoa(g.p)) {
				t.Errorf("%s: the log does not describe the pipeline:\n%s", name, r.stdout)
			}
		}
	}
	// An uneven cut: the MLP's 5 layers as 1 + 4.
	_, ref := trainAt(t, 1, 1, dir, "mlp-ref2", 20, append(mlp, "--batch-size", "16", "--micro-batches", "4")...)
	_, got := trainAt(t, 2, 1, dir, "mlp-stages", 20, append(mlp, "--batch-size", "16", "--micro-batches", "4", "--pipeline", "2", "--stages", "1,4")...)
	sameTensors(t, "mlp --stages 1,4 against np=1", ref, got, 1e-5)
}

func withoutRunningStats(m map[string][]float32) map[string][]float32 {
	m = maps.Clone(m)
	for name := range m {
		if strings.HasSuffix(name, "running_mean") || strings.HasSuffix(name, "running_var") || strings.HasSuffix(name, "num_batches_tracked") {
			delete(m, name)
		}
	}
	return m
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestGridBadInput: each mistake in a model-parallel grid is one line
// naming the option, with a non-zero exit and no Go trace (issue 16,
// must-show 6).
func TestGridBadInput(t *testing.T) {
	e2e(t)
	mlp := []string{"--model", "mlp", "--data", "synthetic", "--synthetic-shape", "1x8x8", "--synthetic-samples", "64", "--max-steps", "2"}
	gpt := []string{"--model", "gpt", "--layers", "2", "--heads", "3", "--dim", "24", "--data", "/nonexistent", "--max-steps", "2"}
	for _, c := range []struct {
		np   int
		args []string
		want string
	}{
		{3, append(mlp, "--pipeline", "2"), "3 rank(s) do not divide into --pipeline 2 x --tensor-parallel 1 = 2"},
		{4, append(mlp, "--pipeline", "4"), "--pipeline 4: the mlp model has 3 layers, and each stage needs at least one"},
		{2, append(mlp, "--pipeline", "2", "--stages", "2,2"), "--stages 2,2: the counts add up to 4 layers"},
		{2, append(mlp, "--pipeline", "2", "--batch-size", "8", "--micro-batches", "3"), "--micro-batches 3 does not divide --batch-size 8"},
		{2, append(gpt, "--tensor-parallel", "2"), "--tensor-parallel 2 does not divide --heads 3"},
		{2, append(mlp, "--tensor-parallel", "2"), "--tensor-parallel 2 with --model mlp"},
		{2, append(mlp, "--schedule", "gpipe"), "--schedule gpipe is not used with --pipeline 1"},
	} {
		r := trainRun(t, c.np, time.Minute, nil, c.args...)
		lines := trainLines(r.stderr)
		if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("np=%d %v: exit %d, stderr lines %q; want one line with %q", c.np, c.args, r.code, lines, c.want)
		}
		noTrace(t, r)
	}
}

// TestTensorParallel: the GPT with its blocks split across T = 2 ranks
// (Megatron-LM's heads and MLP units) trains as np=1 with the same global
// batch, within 1e-5 after 20 steps, on (D,P,T) = (1,1,2), (2,1,2) and
// (1,2,2) (issue 16, must-show 1); and the checkpoint, gathered to rank 0
// in np=1's layout, resumes (must-show 2): bit for bit on the same grid,
// and at (2,1,1) and (1,4,1) within 1e-5 of continuing on (1,2,2).
//
// --eps 1e-6: AdamW divides by sqrt(v) + eps, so where a gradient is
// nearly zero the update is the sign of its rounding, and splitting a sum
// across shards rounds it differently; at 1e-8 one or two such elements
// end just past 1e-5. The key bias is gptSame's exception, for the same
// reason.
func TestTensorParallel(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	gpt := append(smallGPT(bytesCorpus(t, dir)), "--eps", "1e-6")
	_, ref := trainAt(t, 1, 1, dir, "ref", 20, append(gpt, "--batch-size", "16", "--max-steps", "20")...)
	for _, g := range []struct {
		np, d int
		args  []string
	}{
		{2, 1, []string{"--tensor-parallel", "2", "--batch-size", "16"}},
		{4, 2, []string{"--tensor-parallel", "2", "--batch-size", "8"}},
		{4, 1, []string{"--tensor-parallel", "2", "--pipeline", "2", "--micro-batches", "4", "--batch-size", "16", "--schedule", "gpipe"}},
	} {
		name := strings.Join(g.args[:len(g.args)-2], " ")
		_, got := trainAt(t, g.np, g.d, dir, "tp"+itoa(g.np)+itoa(g.d), 20, append(append([]string{}, gpt...), append(g.args, "--max-steps", "20")...)...)
		gptSame(t, name+" against np=1", ref, got, 32)
	}

	// Resume: 20 steps at (1,2,2) with a checkpoint at 10; from that
	// checkpoint, 10 more steps on three grids.
	grid := append(append([]string{}, gpt...), "--tensor-parallel", "2", "--pipeline", "2", "--micro-batches", "4", "--batch-size", "16", "--max-steps", "20")
	_, straight := trainAt(t, 4, 1, dir, "straight", 20, append(grid, "--checkpoint-every", "10")...)
	from := filepath.Join(dir, "straight", "step-00000010.safetensors")
	for _, g := range []struct {
		name  string
		np, d int
		args  []string
	}{
		{"same", 4, 1, grid},
		{"2x1x1", 2, 2, append(append([]string{}, gpt...), "--batch-size", "8", "--max-steps", "20")},
		{"1x4x1", 4, 1, append(append([]string{}, gpt...), "--pipeline", "4", "--micro-batches", "4", "--batch-size", "16", "--max-steps", "20")},
	} {
		ck := filepath.Join(dir, "resume-"+g.name)
		if err := os.MkdirAll(ck, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ck, "step-00000010.safetensors"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, got := trainAt(t, g.np, g.d, dir, "resume-"+g.name, 20, append(g.args, "--resume")...)
		if !strings.Contains(r.stdout, "resume: ") {
			t.Errorf("%s: did not resume:\n%s", g.name, r.stdout)
		}
		if g.name == "same" {
			if !sameFiles(t, filepath.Join(dir, "straight", "step-00000020.safetensors"), filepath.Join(ck, "step-00000020.safetensors")) {
				t.Errorf("resumed on the same grid (1,2,2): the final checkpoint differs from the uninterrupted run's")
			}
			continue
		}
		gptSame(t, "resumed at "+g.name+" against continuing at 1x2x2", straight, got, 32)
	}
}

// TestPipelineTimeline: under --timeline each stage's track holds its
// forward (F i) and backward (B i) of every micro-batch, in the order its
// schedule runs them, each send and each receive of activations and
// gradients, and an arrow (a flow) from each send to its receive on the
// neighbouring rank, which ends after the send began (issue 16,
// must-show 5); train timeline plot draws a step as a PNG.
//
// The expected orders are the schedules' definitions (Huang et al.'s
// GPipe: all forwards, then all backwards; Narayanan et al.'s 1F1B: stage
// s runs P-s-1 forwards, then alternates one forward and one backward,
// then drains), written out by hand for P = 2, M = 4.
func TestPipelineTimeline(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	gpt := append(smallGPT(bytesCorpus(t, dir)), "--max-steps", "3", "--batch-size", "8", "--micro-batches", "4", "--pipeline", "2")
	for _, c := range []struct {
		sched string
		want  [2]string // stage 0's and stage 1's order
	}{
		{"gpipe", [2]string{"F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3"}},
		{"1f1b", [2]string{"F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"}},
	} {
		tr := filepath.Join(dir, c.sched+".json")
		mustTrain(t, 2, append(gpt, "--schedule", c.sched, "--timeline", tr)...)
		var evs []timeline.Event
		for r := range 2 {
			e, err := timeline.Read(timeline.Path(tr, r))
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e...)
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].Ts < evs[j].Ts })
		ops := map[[2]int][]string{} // (rank, step) -> its F and B spans in time order
		steps := map[int][][2]float64{}
		for _, e := range evs {
			if e.Ph == "X" && e.Name == "step" {
				steps[e.Pid] = append(steps[e.Pid], [2]float64{e.Ts, e.Ts + e.Dur})
			}
		}
		sends, recvs := map[int]timeline.Event{}, map[int]timeline.Event{}
		counts := map[string]int{}
		for _, e := range evs {
			switch {
			case e.Ph == "s":
				sends[e.ID] = e
			case e.Ph == "f":
				recvs[e.ID] = e
			case e.Ph == "X" && len(e.Name) >= 2 && (e.Name[0] == 'F' || e.Name[0] == 'B') && e.Name[1] >= '0' && e.Name[1] <= '9':
				for k, st := range steps[e.Pid] {
					if e.Ts >= st[0] && e.Ts+e.Dur <= st[1]+0.01 {
						ops[[2]int{e.Pid, k}] = append(ops[[2]int{e.Pid, k}], e.Name)
					}
				}
			case e.Ph == "X" && (strings.HasPrefix(e.Name, "send ") || strings.HasPrefix(e.Name, "recv ")):
				counts[itoa(e.Pid)+" "+e.Name[:6]]++
			}
		}
		for r := range 2 {
			if len(steps[r]) != 3 {
				t.Fatalf("%s: rank %d has %d step spans, want 3", c.sched, r, len(steps[r]))
			}
			for k := range 3 {
				if got := strings.Join(ops[[2]int{r, k}], " "); got != c.want[r] {
					t.Errorf("%s: rank %d step %d runs %q, want %q", c.sched, r, k, got, c.want[r])
				}
			}
		}
		// Per step, stage 0 sends 4 activations and receives 4 gradients;
		// stage 1 the reverse.
		for k, want := range map[string]int{"0 send F": 12, "0 recv B": 12, "1 recv F": 12, "1 send B": 12} {
			if counts[k] != want {
				t.Errorf("%s: %d %q spans, want %d (all: %v)", c.sched, counts[k], k, want, counts)
			}
		}
		if len(sends) != 24 || len(recvs) != 24 {
			t.Errorf("%s: %d flow starts and %d ends, want 24 each", c.sched, len(sends), len(recvs))
		}
		for id, s := range sends {
			f, ok := recvs[id]
			switch {
			case !ok:
				t.Errorf("%s: the send of flow %d (rank %d) has no receive", c.sched, id, s.Pid)
			case f.Pid == s.Pid:
				t.Errorf("%s: flow %d starts and ends on rank %d", c.sched, id, s.Pid)
			case f.Ts < s.Ts:
				t.Errorf("%s: flow %d is received (rank %d, %.0f us) before it was sent (rank %d, %.0f us)", c.sched, id, f.Pid, f.Ts, s.Pid, s.Ts)
			}
		}
		png := filepath.Join(dir, c.sched+".png")
		r := trainRun(t, 0, time.Minute, nil, "timeline", "plot", timeline.Path(tr, 0), timeline.Path(tr, 1), "-o", png, "--width", "900")
		if r.code != 0 {
			t.Fatalf("timeline plot: %s", r.stderr)
		}
		f, err := os.Open(png)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := stdpng.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width != 900 {
			t.Errorf("timeline plot wrote %s: %+v, %v; want a PNG 900 pixels wide", png, cfg, err)
		}
	}
}

// TestPipelineFailure: a stage's rank that fails or dies ends every rank
// within 10 s, named (issue 16, "failure and stalls"); a stage that hangs
// is named by the watchdog with the micro-batch its neighbour waits for.
func TestPipelineFailure(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	gpt := append(smallGPT(bytesCorpus(t, dir)), "--max-steps", "40", "--batch-size", "8", "--micro-batches", "4", "--log-every", "1")
	for _, c := range []struct {
		np    int
		fault string
		grid  []string
		want  []string
	}{
		{4, "2:5:error", []string{"--pipeline", "4"}, []string{"train: rank 2: stage 2 of 4: injected fault at step 5"}},
		{4, "1:5:error", []string{"--pipeline", "2", "--tensor-parallel", "2"}, []string{"train: rank 1: stage 0 of 2, shard 1 of 2: injected fault at step 5"}},
		{4, "3:5:kill", []string{"--pipeline", "2", "--tensor-parallel", "2"}, []string{"rank 3"}},
		{2, "1:5:hang", []string{"--pipeline", "2", "--stall-warn", "2s", "--stall-timeout", "5s"},
			[]string{"train: rank 0: stall at step 5", "micro-batch", "from stage 1", "aborting (--stall-timeout 5s)"}},
	} {
		r := trainRun(t, c.np, time.Minute, []string{"TRAIN_FAULT=" + c.fault}, append(gpt, c.grid...)...)
		if r.code == 0 {
			t.Errorf("%s %v: exit 0 despite the fault", c.fault, c.grid)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s %v: stderr lacks %q:\n%s", c.fault, c.grid, w, r.stderr)
			}
		}
		limit := 10 * time.Second
		if strings.HasSuffix(c.fault, "hang") {
			limit = 5*time.Second + 10*time.Second // --stall-timeout, then the abort
		}
		if r.took > limit+2*time.Second { // start-up and five steps
			t.Errorf("%s %v: the job took %v to end", c.fault, c.grid, r.took)
		}
		noTrace(t, r)
		t.Logf("%s %v: ended in %v", c.fault, c.grid, r.took.Round(time.Millisecond))
	}
}
