package data

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// writeAtomic writes path through write, atomically: into a temporary
// file in the same directory, renamed over path once complete, so a
// writer killed midway leaves no half file that looks whole.
func writeAtomic(path string, write func(w *bufio.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

// ForEach calls fn(i) for every i in [0, n) on up to workers goroutines
// (at least one), each taking the next i as it finishes one, and
// returns when all have run.
func ForEach(n, workers int, fn func(i int)) {
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	wg.Wait()
}
