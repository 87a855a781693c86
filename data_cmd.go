package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"train/data"
)

// dataCommand holds the image-folder tools.
var dataCommand = &cli.Command{
	Name:  "data",
	Usage: "image folder and tar shard tools",
	Subcommands: []*cli.Command{{
		Name:      "pack",
		Usage:     "write image folders as tar shards in WebDataset's layout (key.jpg or key.png with key.cls), in the folders' order: DIR with train/ and val/ gives OUT/train-NNNNNN.tar and OUT/val-NNNNNN.tar, a folder of class folders OUT/NAME-NNNNNN.tar",
		UsageText: "train data pack /data/imagenet -o /data/shards --shard-mb 256",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "the directory to write the shards in", Required: true},
			&cli.Float64Flag{Name: "shard-mb", Value: 256, Usage: "images per shard, in MiB of image files (a shard holds at least one)"},
			&cli.StringFlag{Name: "name", Value: "train", Usage: "a folder of class folders: the shards' name (NAME-000000.tar, ...)"},
		},
		Action: packFolders,
	}, {
		Name:      "check",
		Usage:     "decode every image of image folders (DIR with train/ and val/, or class folders) or tar shards (a pattern, or a directory train data pack wrote) and name the files that do not decode",
		UsageText: "train data check /data/imagenet",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "workers", Usage: "decoding goroutines (default: the cores)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("train data check: name one or more image folders")
			}
			bad := 0
			for _, dir := range c.Args().Slice() {
				n, err := checkFolders(c, dir, max(c.Int("workers"), 0))
				if err != nil {
					return err
				}
				bad += n
			}
			if bad > 0 {
				return &exit{1}
			}
			return nil
		},
	}, {
		Name:      "bench",
		Usage:     "decode and augment one pass over the training images of an image folder or tar shards as training does (RandomResizedCrop, flip, normalise) and print images/s",
		UsageText: "train data bench --workers 2 /data/imagenet",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "workers", Value: 1, Usage: "decoding goroutines"},
			&cli.IntFlag{Name: "image-size", Value: 224, Usage: "the view's side"},
			&cli.IntFlag{Name: "batch-size", Value: 32, Usage: "images per batch"},
			&cli.IntFlag{Name: "passes", Value: 1, Usage: "passes over the images (epochs)"},
			&cli.IntFlag{Name: "shuffle-buffer", Value: 1000, Usage: "tar shards: the shuffle buffer, in samples"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("train data bench: name one image folder or tar shards (a pattern, or a directory train data pack wrote)")
			}
			return benchFolder(c)
		},
	}},
}

// benchFolder times the training images' batches as training asks for
// them, in each pass's order: an image folder's ImageSet.Batch in the
// sampler's order, or tar shards' TarSet.Batch in one rank's stream plan
// (read order and shuffle buffer of --shuffle-buffer).
func benchFolder(c *cli.Context) error {
	dir := c.Args().First()
	size, b := c.Int("image-size"), c.Int("batch-size")
	if size < 1 || b < 1 || c.Int("workers") < 1 || c.Int("passes") < 1 || c.Int("shuffle-buffer") < 0 {
		return fmt.Errorf("train data bench: --image-size, --batch-size, --workers and --passes must be positive, --shuffle-buffer not negative")
	}
	view := data.View{Size: size, Resize: (size*256 + 112) / 224, Train: true, Crop: true, Flip: true,
		Mean: data.ImageNetMean, Std: data.ImageNetStd, Seed: 1, Workers: c.Int("workers")}
	var batch func(x []float32, y []int32, idx []int, epoch int) error
	var epochOrder func(epoch int) []int
	what := "an image folder"
	if pat, ok := data.ShardPattern(dir, "train"); ok {
		t, err := data.OpenTarShards(pat)
		if err != nil {
			return err
		}
		set := &data.TarSet{TarShards: t, View: view}
		st := data.Stream{Counts: t.Counts, Seed: 1, Shuffle: true, Buffer: c.Int("shuffle-buffer"), Batch: b, Size: 1}
		batch, epochOrder = set.Batch, func(e int) []int {
			read, order := st.Segment(e, 0, nil).Rank(0)
			set.Expect(read)
			return order
		}
		what = fmt.Sprintf("%d tar shards, a shuffle buffer of %d", len(t.Paths), c.Int("shuffle-buffer"))
	} else {
		if c.IsSet("shuffle-buffer") {
			return fmt.Errorf("train data bench: --shuffle-buffer is for tar shards; %s is an image folder (drop it)", dir)
		}
		root := dir
		if data.IsImageFolder(dir) {
			root = filepath.Join(dir, "train")
		}
		f, err := data.ScanFolder(root)
		if err != nil {
			return err
		}
		set := &data.ImageSet{Folder: f, View: view}
		sampler := data.Sampler{N: len(f.Paths), Batch: b, Rank: 0, Size: 1, Seed: 1}
		batch, epochOrder = set.Batch, sampler.Epoch
	}
	x, y := make([]float32, b*3*size*size), make([]int32, b)
	start := time.Now()
	n := 0
	for epoch := range c.Int("passes") {
		order := epochOrder(epoch)
		for s := 0; s+b <= len(order); s += b {
			if err := batch(x, y, order[s:s+b], epoch); err != nil {
				return err
			}
			n += b
		}
	}
	took := time.Since(start)
	if n == 0 {
		return fmt.Errorf("train data bench: %s holds fewer training images than one --batch-size %d", dir, b)
	}
	workers := c.Int("workers")
	fmt.Fprintf(c.App.Writer, "%d images in %.2f s: %.1f images/s with %d worker(s), %.1f per worker (%s; %dx%d views, RandomResizedCrop and flip; JPEG: %s)\n",
		n, took.Seconds(), float64(n)/took.Seconds(), workers, float64(n)/took.Seconds()/float64(workers), what, size, size, data.JPEGDecoder())
	return nil
}

// checkFolders decodes every image under dir (its train/ and val/, or
// dir itself), printing each file that does not decode and a summary;
// it returns how many did not.
func checkFolders(c *cli.Context, dir string, workers int) (int, error) {
	if workers == 0 {
		workers = runtime.NumCPU()
	}
	if _, ok := data.ShardPattern(dir, "train"); ok {
		return checkShards(c, dir, workers)
	}
	roots := []string{dir}
	if data.IsImageFolder(dir) {
		roots = []string{filepath.Join(dir, "train"), filepath.Join(dir, "val")}
	}
	total := 0
	for _, root := range roots {
		f, err := data.ScanFolder(root)
		if err != nil {
			return 0, err
		}
		errs := make([]error, len(f.Paths))
		data.ForEach(len(f.Paths), workers, func(i int) { _, _, _, errs[i] = data.DecodeRGB(f.Paths[i]) })
		bad := 0
		for _, err := range errs {
			if err != nil {
				fmt.Fprintln(c.App.Writer, err)
				bad++
			}
		}
		fmt.Fprintf(c.App.Writer, "%s: %d images in %d classes, %d that do not decode (JPEG: %s)\n", root, len(f.Paths), len(f.Classes), bad, data.JPEGDecoder())
		total += bad
	}
	return total, nil
}

// checkShards is checkFolders for tar shards: a pattern, or a directory
// of train-*.tar and val-*.tar.
func checkShards(c *cli.Context, dir string, workers int) (int, error) {
	var patterns []string
	for _, split := range []string{"train", "val"} {
		if p, ok := data.ShardPattern(dir, split); ok && (split == "train" || !strings.HasSuffix(dir, ".tar")) {
			patterns = append(patterns, p)
		}
	}
	total := 0
	for _, p := range patterns {
		t, err := data.OpenTarShards(p)
		if err != nil {
			return 0, err
		}
		bad, err := t.Check(workers)
		if err != nil {
			return 0, err
		}
		for _, err := range bad {
			fmt.Fprintln(c.App.Writer, err)
		}
		fmt.Fprintf(c.App.Writer, "%s: %d images in %d shards, %d that do not decode (JPEG: %s)\n", p, t.N(), len(t.Paths), len(bad), data.JPEGDecoder())
		total += len(bad)
	}
	return total, nil
}

// packFolders is `train data pack`.
func packFolders(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("train data pack: name one image folder (DIR with train/ and val/, or a folder of class folders)")
	}
	dir, out := c.Args().First(), c.String("o")
	mb := c.Float64("shard-mb")
	if !(mb > 0) {
		return fmt.Errorf("train data pack: --shard-mb %v: must be positive", mb)
	}
	splits := [][2]string{{dir, c.String("name")}}
	if data.IsImageFolder(dir) {
		splits = [][2]string{{filepath.Join(dir, "train"), "train"}, {filepath.Join(dir, "val"), "val"}}
	}
	// A shard left from an earlier pack would be read with these by a
	// pattern that names it (the earlier pack's, say, of more shards).
	for _, sp := range splits {
		if old, _ := filepath.Glob(filepath.Join(out, sp[1]+"-*.tar")); len(old) > 0 {
			return fmt.Errorf("train data pack: -o %s already holds %d %s-*.tar shard(s): remove them, or name another -o", out, len(old), sp[1])
		}
	}
	for _, sp := range splits {
		f, err := data.ScanFolder(sp[0])
		if err != nil {
			return err
		}
		start := time.Now()
		shards, err := data.Pack(f, out, sp[1], int64(mb*(1<<20)), nil)
		if err != nil {
			return fmt.Errorf("train data pack: %v", err)
		}
		fmt.Printf("%s: %d images in %d classes -> %d shards %s (%.1f s)\n", sp[0], len(f.Paths), len(f.Classes), len(shards),
			filepath.Join(out, fmt.Sprintf("%s-{000000..%06d}.tar", sp[1], len(shards)-1)), time.Since(start).Seconds())
	}
	return nil
}
