package trainer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// keyed is a source whose samples have names: a folder's paths, a tar
// shard's keys.
type keyed interface{ key(id int) string }

// sampleLog writes the sample record --sample-log asks for: in dir, each
// rank's samples-rankNNNNN.txt, a line per sample trained on (epoch, step
// and key; for a sample --skip-bad replaced, its stand-in's), to check
// which samples an epoch read, for tests and for a user who doubts it.
type sampleLog struct {
	f   *os.File
	src keyed
}

// openSampleLog opens rank's file in dir, making dir as --checkpoint-dir
// is made, or returns nil when there is nothing to record.
func openSampleLog(dir string, rank int, src source) (*sampleLog, error) {
	k, ok := src.(keyed)
	if dir == "" || !ok {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--sample-log %s: %v", dir, err)
	}
	p := filepath.Join(dir, fmt.Sprintf("samples-rank%05d.txt", rank))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--sample-log %s: %v", dir, err)
	}
	return &sampleLog{f: f, src: k}, nil
}

// step records the samples of a step trained on.
func (l *sampleLog) step(epoch, step int, ids []int) {
	if l == nil {
		return
	}
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d %d %s\n", epoch, step, l.src.key(id))
	}
	l.f.WriteString(b.String())
}

func (l *sampleLog) close() {
	if l != nil {
		l.f.Close()
	}
}
