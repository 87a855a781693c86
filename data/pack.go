package data

import (
	"archive/tar"
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Pack writes an image folder as tar shards in WebDataset's layout:
// dir/prefix-000000.tar, -000001.tar, ..., each closed once it holds
// shardBytes of images (at least one). The samples keep the folder's
// order, so shards read in order with no shuffling give ImageFolder's
// order. A sample's key is its path in the folder without the extension
// (class/name; dots in the name become '_', since a key ends at the first
// dot), its image is key.ext as the file was, and key.cls is its class
// index. Each shard starts with a PAX global header of its sample and
// class counts (tar, Python's tarfile and WebDataset pass over it), and
// is written to a temporary file then renamed, so a stopped pack leaves
// no shard that looks whole. done is told of each shard written.
func Pack(f *Folder, dir, prefix string, shardBytes int64, done func(path string, samples int)) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sizes := make([]int64, len(f.Paths))
	for i, p := range f.Paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		sizes[i] = st.Size()
	}
	keys := make([]string, len(f.Paths))
	seen := map[string]bool{}
	for i, p := range f.Paths {
		rel, err := filepath.Rel(f.Root, p)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		d, base := filepath.Split(rel)
		stem := strings.TrimSuffix(base, filepath.Ext(base))
		k := d + strings.ReplaceAll(stem, ".", "_")
		for n := 1; seen[k]; n++ {
			k = d + strings.ReplaceAll(stem, ".", "_") + "_" + strconv.Itoa(n)
		}
		seen[k], keys[i] = true, k
	}
	var out []string
	for start := 0; start < len(f.Paths); {
		end, bytes := start, int64(0)
		for end < len(f.Paths) && (end == start || bytes+sizes[end] <= shardBytes) {
			bytes += sizes[end]
			end++
		}
		p := filepath.Join(dir, fmt.Sprintf("%s-%06d.tar", prefix, len(out)))
		if err := writeShard(p, f, keys, start, end); err != nil {
			return out, err
		}
		out = append(out, p)
		if done != nil {
			done(p, end-start)
		}
		start = end
	}
	return out, nil
}

// writeShard writes samples [start, end) of f to path, atomically.
func writeShard(path string, f *Folder, keys []string, start, end int) error {
	return writeAtomic(path, func(w *bufio.Writer) error { return packSamples(w, f, keys, start, end) })
}

// packSamples writes samples [start, end) of f to w as a tar file.
func packSamples(w *bufio.Writer, f *Folder, keys []string, start, end int) error {
	tw := tar.NewWriter(w)
	err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{
		paxSamples: strconv.Itoa(end - start), paxClasses: strconv.Itoa(len(f.Classes))}})
	for i := start; i < end && err == nil; i++ {
		var b []byte
		if b, err = os.ReadFile(f.Paths[i]); err != nil {
			break
		}
		ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(f.Paths[i]), "."))
		cls := []byte(strconv.Itoa(int(f.Labels[i])))
		for _, m := range []struct {
			name string
			data []byte
		}{{keys[i] + "." + ext, b}, {keys[i] + ".cls", cls}} {
			if err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: m.name, Mode: 0o644, Size: int64(len(m.data))}); err != nil {
				break
			}
			if _, err = tw.Write(m.data); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = tw.Close()
	}
	return err
}
