package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/urfave/cli/v2"

	"train/data"
)

// dataCommand holds the image-folder tools.
var dataCommand = &cli.Command{
	Name:  "data",
	Usage: "image folder tools",
	Subcommands: []*cli.Command{{
		Name:      "check",
		Usage:     "decode every image of image folders (DIR with train/ and val/, or class folders) and name the files that do not decode",
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
	}},
}

// checkFolders decodes every image under dir (its train/ and val/, or
// dir itself), printing each file that does not decode and a summary;
// it returns how many did not.
func checkFolders(c *cli.Context, dir string, workers int) (int, error) {
	roots := []string{dir}
	if data.IsImageFolder(dir) {
		roots = []string{filepath.Join(dir, "train"), filepath.Join(dir, "val")}
	}
	if workers == 0 {
		workers = runtime.NumCPU()
	}
	total := 0
	for _, root := range roots {
		f, err := data.ScanFolder(root)
		if err != nil {
			return 0, err
		}
		errs := make([]error, len(f.Paths))
		next := make(chan int, len(f.Paths))
		for i := range f.Paths {
			next <- i
		}
		close(next)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					_, _, _, errs[i] = data.DecodeRGB(f.Paths[i])
				}
			}()
		}
		wg.Wait()
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
