package e2e

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"train/data"
)

// packed writes the image folder of imageFolder and packs it with `train
// data pack` into shards of about 10 KB (several images each), returning
// the folder and the shard directory.
func packed(t *testing.T) (folder, shards string) {
	t.Helper()
	dir := t.TempDir()
	folder, shards = filepath.Join(dir, "images"), filepath.Join(dir, "shards")
	imageFolder(t, folder)
	out, err := exec.Command(bin, "data", "pack", folder, "-o", shards, "--shard-mb", "0.01").CombinedOutput()
	if err != nil {
		t.Fatalf("train data pack: %v\n%s", err, out)
	}
	return folder, shards
}

// folderKeys is the training folder's samples as pack keys them
// (class/name, no extension), in ImageFolder's order, and their labels.
func folderKeys(t *testing.T, folder string) ([]string, []int32) {
	t.Helper()
	f, err := data.ScanFolder(filepath.Join(folder, "train"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range f.Paths {
		rel, _ := filepath.Rel(f.Root, p)
		keys = append(keys, strings.TrimSuffix(rel, filepath.Ext(rel)))
	}
	return keys, f.Labels
}

// sampleRecord is one line of a --sample-log file: a sample trained on.
type sampleRecord struct {
	epoch, step int
	key         string
}

// sampleRecords reads the --sample-log files in dir, rank by rank, each
// in its order; it fails the test when there are none.
func sampleRecords(t *testing.T, dir string) []sampleRecord {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "samples-rank*.txt"))
	if len(files) == 0 {
		t.Fatalf("no sample record in %s", dir)
	}
	var recs []sampleRecord
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r sampleRecord
			if _, err := fmt.Sscan(l, &r.epoch, &r.step, &r.key); err != nil {
				t.Fatalf("%s: %q: %v", f, l, err)
			}
			recs = append(recs, r)
		}
	}
	return recs
}

// sampleKeys reads the --sample-log files in dir (given here as its
// TRAIN_SAMPLE_LOG variable): per epoch, every key trained on (all
// ranks, rank by rank, in order).
func sampleKeys(t *testing.T, dir string) map[int][]string {
	t.Helper()
	byEpoch := map[int][]string{}
	for _, r := range sampleRecords(t, dir) {
		byEpoch[r.epoch] = append(byEpoch[r.epoch], r.key)
	}
	return byEpoch
}

// sameSteps fails unless the --sample-log records in dirs a and b hold
// the same samples at every (epoch, step), whichever rank read them: two
// runs at different np that must train on the same global batches.
func sameSteps(t *testing.T, what, a, b string) {
	t.Helper()
	read := func(dir string) map[[2]int][]string {
		steps := map[[2]int][]string{}
		for _, r := range sampleRecords(t, dir) {
			steps[[2]int{r.epoch, r.step}] = append(steps[[2]int{r.epoch, r.step}], r.key)
		}
		for _, keys := range steps {
			slices.Sort(keys)
		}
		return steps
	}
	want, got := read(a), read(b)
	if !maps.EqualFunc(want, got, slices.Equal) {
		t.Errorf("%s: the global batches differ:\n%v\nwant\n%v", what, got, want)
	}
}

// onceEach fails unless got holds every key of want once.
func onceEach(t *testing.T, what string, got, want []string) {
	t.Helper()
	a, b := slices.Clone(got), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Errorf("%s: %d samples read, want each of the %d once; read %v", what, len(got), len(want), got)
	}
}

// TestTarShards (issue 20, "shards"): `train data pack` writes
// WebDataset's layout, as Python's tarfile (what WebDataset reads shards
// with) lists it: key.png or key.jpg then key.cls, the class index, in
// the folder's order. Training from the shards with --shuffle=false reads
// them in that order; shuffled, at np 1, 2 and 3 the ranks together read
// every sample once per epoch (30 samples, one a step per rank, so no
// epoch leaves any out), also across a stop at np=2 and a resume at np=3
// mid-epoch; and a run resumed mid-epoch at the same np ends on the
// straight run's checkpoint byte for byte.
func TestTarShards(t *testing.T) {
	e2e(t)
	folder, shards := packed(t)
	keys, labels := folderKeys(t, folder)

	// The layout, read by Python's tarfile.
	list := `import sys, tarfile
for p in sys.argv[1:]:
    with tarfile.open(p) as t:
        for m in t:
            print(m.name, t.extractfile(m).read().decode() if m.name.endswith(".cls") else "")`
	paths, _ := filepath.Glob(filepath.Join(shards, "train-*.tar"))
	// Packing again into the same directory is refused, the shards left
	// as they were: an earlier pack's pattern would read them with the
	// new ones.
	before := dirBytes(t, shards)
	again := trainRun(t, 0, time.Minute, nil, "data", "pack", folder, "-o", shards, "--shard-mb", "1")
	if lines := trainLines(again.stderr); again.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "-o "+shards+" already holds") {
		t.Errorf("a second pack into %s: exit %d, %q", shards, again.code, again.stderr)
	}
	if after := dirBytes(t, shards); len(after) != len(before) {
		t.Errorf("a refused pack changed %s: %d files, %d before", shards, len(after), len(before))
	}
	if len(paths) < 3 {
		t.Fatalf("train data pack wrote %d training shards, want several (--shard-mb 0.01)", len(paths))
	}
	out, err := exec.Command("/usr/bin/python3", append([]string{"-c", list}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python3 tarfile: %v\n%s", err, out)
	}
	var members []string
	for i, k := range keys {
		ext := ".png"
		if strings.HasSuffix(k, "1") || strings.HasSuffix(k, "3") || strings.HasSuffix(k, "5") || strings.HasSuffix(k, "7") || strings.HasSuffix(k, "9") {
			ext = ".jpg" // imageFolder writes odd-numbered images as JPEG
		}
		members = append(members, k+ext+" ", fmt.Sprintf("%s.cls %d", k, labels[i]))
	}
	if got := strings.Split(strings.TrimRight(string(out), "\n"), "\n"); !slices.Equal(got, members) {
		t.Errorf("the shards' members, by tarfile:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(members, "\n"))
	}

	base := []string{"--model", "mlp", "--hidden", "16", "--data", shards, "--image-size", "16", "--batch-size", "1", "--log-every", "5", "--seed", "4"}
	run := func(np int, logs string, args ...string) result {
		t.Helper()
		r := trainRun(t, np, 3*time.Minute, []string{"TRAIN_SAMPLE_LOG=" + logs}, append(slices.Clone(base), args...)...)
		if r.code != 0 {
			t.Fatalf("np=%d %v: exit %d\n%s", np, args, r.code, r.stderr)
		}
		return r
	}

	ordered := t.TempDir()
	run(1, ordered, "--epochs", "1", "--shuffle=false")
	if got := sampleKeys(t, ordered)[0]; !slices.Equal(got, keys) {
		t.Errorf("--shuffle=false at np=1: read\n%v\nwant the folder's order\n%v", got, keys)
	}
	for np := 1; np <= 3; np++ {
		logs := t.TempDir()
		run(np, logs, "--epochs", "2", "--shuffle-buffer", "5")
		byEpoch := sampleKeys(t, logs)
		for e := range 2 {
			onceEach(t, fmt.Sprintf("np=%d epoch %d", np, e+1), byEpoch[e], keys)
		}
		if np == 1 && slices.Equal(byEpoch[0], byEpoch[1]) {
			t.Error("np=1: epochs 1 and 2 read the samples in the same order")
		}
	}

	// Stopped at np=2 after 6 steps (12 samples), resumed at np=3.
	logs, ck := t.TempDir(), t.TempDir()
	run(2, logs, "--epochs", "1", "--max-steps", "6", "--checkpoint-dir", ck)
	r := run(3, logs, "--epochs", "1", "--checkpoint-dir", ck, "--resume")
	if !strings.Contains(r.stdout, "continuing epoch 1 at sample 12") {
		t.Errorf("the resume at np=3 does not say it continues epoch 1 at sample 12:\n%s", r.stdout)
	}
	onceEach(t, "np=2 stopped at step 6, resumed at np=3", sampleKeys(t, logs)[0], keys)

	// A shard of another tool (no count header) with a broken image:
	// `train data check` names it and exits 1; training stops in one line
	// naming it, or with --skip-bad runs on.
	broken := filepath.Join(shards, "train-000001.tar")
	brokenKey := breakShard(t, broken)
	if r := trainRun(t, 0, time.Minute, nil, "data", "check", shards); r.code != 1 || !strings.Contains(r.stdout, broken+":") || !strings.Contains(r.stdout, "1 that do not decode") {
		t.Errorf("train data check on a broken shard: exit %d, want 1 and the member named:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = trainRun(t, 2, 3*time.Minute, nil, append(slices.Clone(base), "--epochs", "1")...)
	if lines := trainLines(r.stderr); r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], broken+":") {
		t.Errorf("training on a broken shard: exit %d, want one line naming %s:\n%s", r.code, broken, r.stderr)
	}
	noTrace(t, r)
	skipped := t.TempDir()
	r = run(2, skipped, "--epochs", "1", "--skip-bad")
	if !strings.Contains(r.stderr, "skipping an image that does not decode") || !strings.Contains(r.stdout, "counted by reading them") {
		t.Errorf("--skip-bad on a broken shard of another tool: no warning, or no word of the shard counted by reading it:\n%s\n%s", r.stdout, r.stderr)
	}
	// The record names what was trained on: the broken sample's stand-in.
	if got := sampleKeys(t, skipped)[0]; slices.Contains(got, brokenKey) || len(got) != len(keys) {
		t.Errorf("--skip-bad: the sample record holds the broken %s, or %d samples (want %d): %v", brokenKey, len(got), len(keys), got)
	}

	// Resumed at the same np: the same order, the same weights.
	_, shards = packed(t)
	base[5] = shards
	dir := t.TempDir()
	straight, split := filepath.Join(dir, "straight"), filepath.Join(dir, "split")
	run(2, t.TempDir(), "--max-steps", "20", "--checkpoint-dir", straight)
	run(2, t.TempDir(), "--max-steps", "7", "--checkpoint-dir", split)
	run(2, t.TempDir(), "--max-steps", "20", "--checkpoint-dir", split, "--resume")
	if !sameFiles(t, filepath.Join(straight, "step-00000020.safetensors"), filepath.Join(split, "step-00000020.safetensors")) {
		t.Error("np=2 stopped at step 7 (mid-epoch) and resumed does not end on the straight run's checkpoint")
	}
}

// breakShard rewrites a shard as another tool would (Go's archive/tar, no
// count header), cutting its first image to a third, and returns that
// sample's key.
func breakShard(t *testing.T, path string) (key string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tr, tw := tar.NewReader(f), tar.NewWriter(&buf)
	cut := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, _ := io.ReadAll(tr)
		if !cut && !strings.HasSuffix(h.Name, ".cls") {
			b, cut = b[:len(b)/3], true
			key = strings.TrimSuffix(h.Name, filepath.Ext(h.Name))
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: h.Name, Mode: 0o644, Size: int64(len(b))})
		tw.Write(b)
	}
	f.Close()
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return key
}
