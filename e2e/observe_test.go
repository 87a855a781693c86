package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"train/mpi/mpitest"
	"train/runlog"
)

// freePorts returns n TCP ports nothing listens on now, the first of
// which has the next one free too (a 2-rank job binds port and port+1).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		l.Close()
		if err != nil {
			continue
		}
		l2.Close()
		ports = append(ports, p)
	}
	return ports
}

// startDaemon starts a server in the background and stops it (by its pid)
// when the test ends.
func startDaemon(t *testing.T, name string, args ...string) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not installed: run scripts/setup.sh --test", name)
	}
	cmd := exec.Command(path, args...)
	log, _ := os.Create(filepath.Join(t.TempDir(), name+".log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		log.Close()
	})
}

// waitHTTP polls url until it answers 200 or the deadline passes.
func waitHTTP(t *testing.T, u string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready within %v", u, within)
}

// promSeries runs an instant query and returns instance (or job) -> value.
func promSeries(t *testing.T, prom, query string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s", query, err, r.Status)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(s.Value[1].(string), 64)
		out[s.Metric["instance"]+"/"+s.Metric["job"]] = v
	}
	return out
}

// eventually polls check until it returns "" or the deadline passes.
func eventually(t *testing.T, within time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		if last = check(); last == "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("within %v: %s", within, last)
}

// TestMetricsServers runs prometheus and pushgatewaySilent side by side
// (parallel subtests of a test in sequence with the rest): each spends
// most of its time waiting, on Prometheus's scrapes or on the silent
// gateway's timeouts (7.5 and 10.5 s in a row), on ports of its own.
func TestMetricsServers(t *testing.T) {
	e2e(t)
	for _, c := range []struct {
		name string
		run  func(*testing.T)
	}{{"Prometheus", prometheus}, {"PushgatewaySilent", pushgatewaySilent}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

// prometheus scrapes a 2-rank training run with a real Prometheus and
// receives its pushes in a real Pushgateway (Debian's packages, started
// here on ports of their own), asserting through Prometheus' query API:
// the samples counter rises on both ranks, the loss and step-time series
// exist, and the pushed series arrive under the job's name.
func prometheus(t *testing.T) {
	e2e(t)
	ports := freePorts(t, 3)
	train, prom, gw := ports[0], ports[1], ports[2]
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: train
    static_configs:
      - targets: ["127.0.0.1:%d", "127.0.0.1:%d"]
  - job_name: pushgateway
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:%d"]
`, train, train+1, gw)
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644)
	startDaemon(t, "prometheus-pushgateway", fmt.Sprintf("--web.listen-address=127.0.0.1:%d", gw))
	startDaemon(t, "prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", prom))
	promURL := fmt.Sprintf("http://127.0.0.1:%d", prom)
	waitHTTP(t, promURL+"/-/ready", 20*time.Second)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/-/ready", gw), 20*time.Second)

	// A long run (small batches), stopped when the assertions hold.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := mpitest.Command(ctx, 2, bin, "--epochs", "50", "--batch-size", "8", "--log-every", "500",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", train),
		"--pushgateway", fmt.Sprintf("http://127.0.0.1:%d", gw), "--pushgateway-every", "100")
	job.Env = append(os.Environ(), "SLURM_JOB_ID=")
	out, _ := os.Create(filepath.Join(dir, "train.log"))
	job.Stdout, job.Stderr = out, out
	job.WaitDelay = 5 * time.Second
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		job.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "train.log"))
			t.Logf("training output:\n%s", b)
		}
	}()

	instances := []string{fmt.Sprintf("127.0.0.1:%d/train", train), fmt.Sprintf("127.0.0.1:%d/train", train+1)}
	var first map[string]float64
	eventually(t, 45*time.Second, func() string {
		first = promSeries(t, promURL, `train_samples_total{job="train",instance=~"127.0.0.1:.*"}`)
		for _, in := range instances {
			if first[in] <= 0 {
				return fmt.Sprintf("train_samples_total not yet > 0 on %s: %v", in, first)
			}
		}
		return ""
	})
	eventually(t, 20*time.Second, func() string {
		now := promSeries(t, promURL, `train_samples_total{job="train",instance=~"127.0.0.1:.*"}`)
		for _, in := range instances {
			if now[in] <= first[in] {
				return fmt.Sprintf("train_samples_total did not rise on %s: %v then %v", in, first[in], now[in])
			}
		}
		return ""
	})
	eventually(t, 20*time.Second, func() string {
		// Scraped series, not the pushed ones (instance rank0).
		for _, q := range []string{`train_loss{split="train"}`, `train_step_duration_seconds_count`,
			`train_step_phase_duration_seconds_count{phase="allreduce_wait"}`, `train_info{world_size="2"}`, `train_collective_seq{comm="world"}`} {
			q = strings.Replace(q, "}", `,job="train",instance=~"127.0.0.1:.*"}`, 1)
			if !strings.Contains(q, "{") {
				q += `{job="train",instance=~"127.0.0.1:.*"}`
			}
			if s := promSeries(t, promURL, q); len(s) != 2 {
				return fmt.Sprintf("%s: %d series, want one per rank: %v", q, len(s), s)
			}
		}
		return ""
	})
	// Pushed by rank 0 every 100 steps, scraped from the gateway.
	eventually(t, 30*time.Second, func() string {
		s := promSeries(t, promURL, `train_samples_total{job="train",instance="rank0"}`)
		if s["rank0/train"] <= 0 {
			return fmt.Sprintf("no pushed train_samples_total from rank0: %v", s)
		}
		return ""
	})
}

// TestTimeline: each rank writes its trace; the merged trace is valid
// JSON with one pid per rank, each step's phases nested in it and in
// order, steps in order, and the buckets' allreduces on their own track.
func TestTimeline(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	mustTrain(t, 2, "--max-steps", "12", "--log-every", "4", "--hidden", "256,128", "--bucket-mb", "0.1",
		"--timeline", filepath.Join(dir, "trace.json"))
	merged := filepath.Join(dir, "merged.json")
	r := trainRun(t, 0, time.Minute, nil, "timeline", "merge", "-o", merged,
		filepath.Join(dir, "trace.rank0.json"), filepath.Join(dir, "trace.rank1.json"))
	if r.code != 0 {
		t.Fatalf("merge: %s", r.stderr)
	}
	b, err := os.ReadFile(merged)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name     string
			Ph       string
			Ts, Dur  float64
			Pid, Tid int
		}
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("merged trace is not JSON: %v", err)
	}
	type span struct {
		name       string
		start, end float64
	}
	tracks := map[[2]int][]span{}
	pids := map[int]bool{}
	for _, e := range tr.TraceEvents {
		pids[e.Pid] = true
		if e.Ph == "X" {
			tracks[[2]int{e.Pid, e.Tid}] = append(tracks[[2]int{e.Pid, e.Tid}], span{e.Name, e.Ts, e.Ts + e.Dur})
		}
	}
	if len(pids) != 2 || !pids[0] || !pids[1] {
		t.Fatalf("pids %v, want 0 and 1", pids)
	}
	for pid := range 2 {
		main := tracks[[2]int{pid, 0}]
		sort.SliceStable(main, func(i, j int) bool { return main[i].start < main[j].start })
		var steps []span
		for _, s := range main {
			if s.name == "step" {
				steps = append(steps, s)
			}
		}
		if len(steps) != 12 {
			t.Fatalf("rank %d: %d step spans, want 12", pid, len(steps))
		}
		for i, st := range steps {
			if i > 0 && st.start < steps[i-1].end {
				t.Errorf("rank %d: step %d starts before step %d ends", pid, i, i-1)
			}
			var inside []string
			last := st.start
			for _, s := range main {
				if s.name != "step" && s.start >= st.start-0.01 && s.end <= st.end+0.01 {
					inside = append(inside, s.name)
					if s.start < last-0.01 {
						t.Errorf("rank %d step %d: %s starts before the phase before it ends", pid, i, s.name)
					}
					last = s.end
				}
			}
			if strings.Join(inside, ",") != "data,forward,backward,allreduce_wait,optimizer" {
				t.Fatalf("rank %d step %d holds %v", pid, i, inside)
			}
		}
		comm := tracks[[2]int{pid, 1}]
		if len(comm) < 2*12 || comm[0].name != "allreduce" {
			t.Errorf("rank %d: %d spans on the allreduce track, want two buckets per step", pid, len(comm))
		}
	}
}

// TestRunLogAndPlot: --log-file records the run, --plot draws it, and
// train plot draws a PNG of the size asked for from the log.
func TestRunLogAndPlot(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	log, png1 := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "end.png")
	mustTrain(t, 2, "--max-steps", "40", "--log-every", "10", "--log-file", log, "--plot", png1)
	recs, err := runlog.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, r := range recs {
		types[r.Type]++
	}
	if types["start"] != 1 || types["step"] != 4 || types["epoch"] != 1 || types["done"] != 1 {
		t.Errorf("records %v", types)
	}
	png2 := filepath.Join(dir, "curves.png")
	r := trainRun(t, 0, time.Minute, nil, "plot", log, "-o", png2, "--width", "800", "--height", "600")
	if r.code != 0 {
		t.Fatalf("train plot: %s", r.stderr)
	}
	for path, size := range map[string][2]int{png1: {1200, 900}, png2: {800, 600}} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width != size[0] || cfg.Height != size[1] {
			t.Errorf("%s: %dx%d (%v), want %dx%d", path, cfg.Width, cfg.Height, err, size[0], size[1])
		}
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("not json\n"), 0o644)
	r = trainRun(t, 0, time.Minute, nil, "plot", bad, "-o", filepath.Join(dir, "x.png"))
	if lines := trainLines(r.stderr); r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], bad+":1") {
		t.Errorf("bad log: exit %d %q", r.code, r.stderr)
	}
}

// TestPrometheusScripts: promtool accepts the scrape configuration, and
// the Slurm prolog writes one target per rank from Slurm's task layout
// (scontrol is replaced by a stand-in that expands the node list; the real
// Slurm runs in the operations tests).
func TestPrometheusScripts(t *testing.T) {
	e2e(t)
	out, err := exec.Command("promtool", "check", "config", "scripts/prometheus/prometheus.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool check config: %v\n%s", err, out)
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "bin")
	os.MkdirAll(fake, 0o755)
	os.WriteFile(filepath.Join(fake, "scontrol"), []byte("#!/bin/sh\n[ \"$1 $2\" = 'show hostnames' ] && printf 'n1\\nn2\\nn3\\n'\n"), 0o755)
	targets := filepath.Join(dir, "targets")
	cmd := exec.Command("scripts/prometheus/slurm-prolog.sh")
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"), "TRAIN_TARGETS_DIR="+targets,
		"SLURM_JOB_ID=77", "SLURM_JOB_NAME=r20", "SLURM_JOB_NODELIST=n[1-3]", "SLURM_TASKS_PER_NODE=2(x2),1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prolog: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(targets, "job-77.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sd []struct {
		Targets []string
		Labels  map[string]string
	}
	if err := json.Unmarshal(b, &sd); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(sd) != 1 || strings.Join(sd[0].Targets, " ") != "n1:9400 n1:9401 n2:9400 n2:9401 n3:9400" || sd[0].Labels["slurm_job_id"] != "77" {
		t.Errorf("targets %s", b)
	}
	epi := exec.Command("scripts/prometheus/slurm-epilog.sh")
	epi.Env = append(os.Environ(), "TRAIN_TARGETS_DIR="+targets, "SLURM_JOB_ID=77")
	if out, err := epi.CombinedOutput(); err != nil {
		t.Fatalf("epilog: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(targets, "job-77.json")); !os.IsNotExist(err) {
		t.Error("epilog left the targets file")
	}
}

// pushgatewaySilent: a Pushgateway that takes the connection and
// never answers does not hold the job: every step pushes
// (--pushgateway-every 1), the job ends with exit 0 within the push's
// timeout (5 s) twice over, and says so in two lines (the first failure,
// the end's). Before, rank 0 waited in the first push with no timeout,
// every other rank in the next collective, and SIGTERM went unheard.
func pushgatewaySilent(t *testing.T) {
	e2e(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // accepted, never read or answered
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	gw := "http://" + ln.Addr().String()
	r := trainRun(t, 2, time.Minute, nil, "--max-steps", "30", "--log-every", "10", "--pushgateway", gw, "--pushgateway-every", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "done: step 30") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r.took > 25*time.Second {
		t.Errorf("the job took %v with a silent gateway", r.took)
	}
	lines := trainLines(r.stderr)
	if len(lines) != 2 || !strings.Contains(lines[0], "--pushgateway "+gw) || !strings.Contains(lines[1], "the final one included, failed") {
		t.Errorf("want two lines about the gateway, got:\n%s", r.stderr)
	}
	noTrace(t, r)
	t.Logf("ended in %v: %s", r.took.Round(time.Millisecond), strings.Join(lines, " | "))
}
