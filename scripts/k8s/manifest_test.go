package k8s

// The MPIJob manifest and its container recipe, checked as far as a
// machine without a container engine or a cluster allows: the manifest
// decodes strictly into the MPI Operator's own Go types and passes the
// operator's validation; the launcher's mpirun command fits the workers,
// names the binary the Dockerfile installs and only flags train knows; the
// Dockerfile's packages exist in Debian 12; the entry point works.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	v2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	"github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/validation"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// manifest decodes mpijob.yaml's documents strictly: an unknown or
// misspelt field anywhere is an error.
func manifest(t *testing.T) (*v2.MPIJob, *corev1.PersistentVolumeClaim) {
	t.Helper()
	b, err := os.ReadFile("mpijob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job *v2.MPIJob
	var pvc *corev1.PersistentVolumeClaim
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var into any
		switch tm.APIVersion + " " + tm.Kind {
		case "kubeflow.org/v2beta1 MPIJob":
			job = &v2.MPIJob{}
			into = job
		case "v1 PersistentVolumeClaim":
			pvc = &corev1.PersistentVolumeClaim{}
			into = pvc
		default:
			t.Fatalf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("document %d (%s): %v", i, tm.Kind, err)
		}
	}
	if job == nil || pvc == nil {
		t.Fatal("want an MPIJob and the PersistentVolumeClaim of its checkpoints")
	}
	return job, pvc
}

func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	// The check above is only worth something if a typo fails it.
	bad := "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nspec:\n  slotPerWorker: 1\n"
	if err := yaml.UnmarshalStrict([]byte(bad), &v2.MPIJob{}); err == nil || !strings.Contains(err.Error(), "slotPerWorker") {
		t.Fatalf("a misspelt field decoded without error: %v", err)
	}
}

func TestMPIJobManifest(t *testing.T) {
	job, pvc := manifest(t)
	v2.SetObjectDefaults_MPIJob(job)
	if errs := validation.ValidateMPIJob(job); len(errs) > 0 {
		t.Fatalf("the MPI Operator's validation: %v", errs.ToAggregate())
	}
	launcher, worker := job.Spec.MPIReplicaSpecs[v2.MPIReplicaTypeLauncher], job.Spec.MPIReplicaSpecs[v2.MPIReplicaTypeWorker]
	if launcher == nil || worker == nil || worker.Replicas == nil {
		t.Fatal("want Launcher and Worker replica specs")
	}
	lc, wc := launcher.Template.Spec.Containers[0], worker.Template.Spec.Containers[0]
	if lc.Image != wc.Image {
		t.Errorf("launcher image %s, worker image %s: one image serves both", lc.Image, wc.Image)
	}

	// mpirun -n matches the slots, and runs the installed binary.
	if len(lc.Command) != 1 || lc.Command[0] != "mpirun" {
		t.Fatalf("launcher command %v, want mpirun", lc.Command)
	}
	args := lc.Args
	prog := -1
	for i, a := range args {
		if (a == "-n" || a == "-np") && i+1 < len(args) {
			n, _ := strconv.Atoi(args[i+1])
			if want := int(*worker.Replicas * *job.Spec.SlotsPerWorker); n != want {
				t.Errorf("mpirun -n %d, but %d workers x %d slots", n, *worker.Replicas, *job.Spec.SlotsPerWorker)
			}
		}
		if strings.HasPrefix(a, "/") && prog < 0 {
			prog = i
		}
	}
	if prog < 0 {
		t.Fatal("no program path in the launcher's mpirun arguments")
	}
	docker, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^COPY --from=build \S+ ` + regexp.QuoteMeta(args[prog]) + `$`).Match(docker) {
		t.Errorf("the Dockerfile does not install %s", args[prog])
	}

	// Every flag is one train accepts.
	bin := filepath.Join(t.TempDir(), "train")
	if out, err := exec.Command("go", "build", "-C", "../..", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	flags := map[string]string{}
	for i := prog + 1; i < len(args); i++ {
		if name, ok := strings.CutPrefix(args[i], "--"); ok {
			if !bytes.Contains(help, []byte("--"+name+" ")) {
				t.Errorf("train has no flag --%s", name)
			}
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				flags[name] = args[i+1]
			} else {
				flags[name] = "true"
			}
		}
	}
	if flags["resume"] != "true" {
		t.Error("no --resume: a restarted launcher would start again from step 0")
	}

	// Checkpoints go to the claim, mounted in the workers (rank 0 runs on
	// one of them).
	var mount string
	for _, vm := range wc.VolumeMounts {
		for _, v := range worker.Template.Spec.Volumes {
			if v.Name == vm.Name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
				mount = vm.MountPath
			}
		}
	}
	if mount == "" || !strings.HasPrefix(flags["checkpoint-dir"], mount+"/") {
		t.Errorf("--checkpoint-dir %q is not on the workers' mount of claim %s (%q)", flags["checkpoint-dir"], pvc.Name, mount)
	}
	if len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("claim %s: access modes %v, want ReadWriteMany (several worker pods mount it)", pvc.Name, pvc.Spec.AccessModes)
	}

	// Metrics: the port served is the port declared and annotated.
	_, port, _ := strings.Cut(flags["metrics-addr"], ":")
	if len(wc.Ports) != 1 || strconv.Itoa(int(wc.Ports[0].ContainerPort)) != port || worker.Template.Annotations["prometheus.io/port"] != port {
		t.Errorf("--metrics-addr %s, worker ports %v, annotation %q: they should agree", flags["metrics-addr"], wc.Ports, worker.Template.Annotations["prometheus.io/port"])
	}

	// ssh: the workers run sshd with the config the image has, as the
	// user whose home holds the keys.
	if len(wc.Command) != 1 || wc.Command[0] != "/usr/sbin/sshd" || !strings.Contains(strings.Join(wc.Args, " "), "-f /home/mpiuser/.sshd_config") {
		t.Errorf("worker runs %v %v, want /usr/sbin/sshd -De -f /home/mpiuser/.sshd_config", wc.Command, wc.Args)
	}
	if job.Spec.SSHAuthMountPath != "/home/mpiuser/.ssh" || !bytes.Contains(docker, []byte("useradd -m mpiuser")) || !bytes.Contains(docker, []byte("COPY --chown=mpiuser scripts/k8s/sshd_config .sshd_config")) {
		t.Error("sshAuthMountPath, the image's user and its sshd config disagree")
	}
}

// TestDockerfile checks what can be checked without a container engine:
// the base images are Debian 12, the files it copies exist, the build
// stage runs the setup script CI runs, and every package it installs is in
// Debian 12's archive.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	docker := string(b)
	for _, m := range regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(docker, -1) {
		if !strings.HasPrefix(m[1], "debian:12") {
			t.Errorf("FROM %s: the project supports Debian 12", m[1])
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY (?:--chown=\S+ )?(scripts/\S+) `).FindAllStringSubmatch(docker, -1) {
		if _, err := os.Stat(filepath.Join("../..", m[1])); err != nil {
			t.Errorf("COPY %s: %v", m[1], err)
		}
	}
	if !strings.Contains(docker, "RUN scripts/setup.sh --no-run") {
		t.Error("the build stage should run scripts/setup.sh --no-run, the README's install step")
	}
	m := regexp.MustCompile(`apt-get install -y --no-install-recommends \\\n((?:\t\t.*\n)+)`).FindStringSubmatch(docker)
	if m == nil {
		t.Fatal("no apt-get install in the runtime stage")
	}
	pkgs := strings.Fields(strings.NewReplacer("\\", " ", "&&", " ").Replace(strings.Split(m[1], "&&")[0]))
	if len(pkgs) < 4 {
		t.Fatalf("packages %v", pkgs)
	}
	for _, p := range pkgs {
		out, err := exec.Command("apt-cache", "policy", p).Output()
		if err != nil || !regexp.MustCompile(`Candidate: [0-9]`).Match(out) {
			t.Errorf("package %s is not in this machine's Debian archive (apt-cache policy: %s)", p, strings.TrimSpace(string(out)))
		}
	}
	t.Logf("runtime packages %v all available", pkgs)
}

// TestEntrypoint: the launcher waits for its workers to resolve, then runs
// the command; it gives up with a message naming the host.
func TestEntrypoint(t *testing.T) {
	dir := t.TempDir()
	run := func(hosts string) (string, error) {
		hf := filepath.Join(dir, "hostfile")
		os.WriteFile(hf, []byte(hosts), 0o644)
		cmd := exec.Command("./entrypoint.sh", "echo", "launched")
		cmd.Env = append(os.Environ(), "K_MPI_JOB_ROLE=launcher", "MPI_HOSTFILE="+hf, "TRAIN_DNS_WAIT=2")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("localhost slots=1\n"); err != nil || out != "launched\n" {
		t.Errorf("resolvable worker: %v %q", err, out)
	}
	if out, err := run("localhost slots=1\nno-such-worker.invalid slots=1\n"); err == nil || !strings.Contains(out, "no-such-worker.invalid") {
		t.Errorf("unresolvable worker: %v %q", err, out)
	}
}
