package trainer

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"train/data"
	"train/model"
)

// source is what a Session trains or evaluates on: Len samples of XSize
// input values and YSize labels each (an image and its class; a window of
// tokens and the next token at each position).
type source interface {
	Len() int
	XSize() int
	YSize() int
	// Batch writes samples idx into x and y; epoch draws the training
	// split's augmentation. An error names the sample's file (image
	// folders decode as they go).
	Batch(x []float32, y []int32, idx []int, epoch int) error
}

// images is an image dataset; the training split augments.
type images struct {
	d   *data.Dataset
	aug *data.Augment // nil: the test split
}

func (s images) Len() int   { return s.d.N }
func (s images) XSize() int { return s.d.SampleSize() }
func (s images) YSize() int { return 1 }

func (s images) Batch(x []float32, y []int32, idx []int, epoch int) error {
	if s.aug == nil {
		s.d.Batch(x, y, idx)
		return nil
	}
	s.d.BatchAugmented(x, y, idx, *s.aug, epoch)
	return nil
}

// folderImages is an image folder, decoded batch by batch.
type folderImages struct{ *data.ImageSet }

func (s folderImages) XSize() int     { return s.SampleSize() }
func (s folderImages) YSize() int     { return 1 }
func (s folderImages) prefetch() bool { return true }

// tarImages are tar shards, read in each rank's order (streamSampler)
// and decoded batch by batch.
type tarImages struct{ *data.TarSet }

func (s tarImages) XSize() int        { return s.SampleSize() }
func (s tarImages) YSize() int        { return 1 }
func (s tarImages) prefetch() bool    { return true }
func (s tarImages) key(id int) string { return s.TakeKey(id) }

func (s folderImages) key(id int) string { return s.Used(id) }

// tokens are windows of a token corpus (a language model's data).
type tokens struct{ w data.Windows }

func (s tokens) Len() int   { return s.w.Len() }
func (s tokens) XSize() int { return s.w.T }
func (s tokens) YSize() int { return s.w.T }
func (s tokens) Batch(x []float32, y []int32, idx []int, _ int) error {
	s.w.Batch(x, y, idx)
	return nil
}

// load reads --data for the model and builds the model for it: the
// image models take their input shape and classes from the images, gpt
// its vocabulary from the tokens (their tokenizer.json, or --vocab).
func (s *Session) load() error {
	c := &s.Cfg
	if c.Model.Kind == "gpt" {
		return s.loadTokens()
	}
	if c.Data.imageFolder() {
		return s.loadFolders()
	}
	train, test, err := data.Load(data.Source{Dir: c.Data.Dir, SyntheticShape: c.Data.SyntheticShape, SyntheticSamples: max(c.Data.SyntheticSamples, 1), Seed: c.Optim.Seed})
	if errors.Is(err, data.ErrNotFound) {
		return fmt.Errorf("--data %s: %v: %s", c.Data.Dir, err, SetupHint)
	}
	if err != nil {
		return err
	}
	crop, flip := c.augment()
	s.augment = data.Augment{Flip: flip, Seed: c.Optim.Seed}
	if crop {
		s.augment.Pad = c.Data.CropPad
	}
	s.trainSet, s.testSet = images{train, &s.augment}, images{test, nil}
	s.dataName = fmt.Sprintf("%s: %d training and %d test samples of %dx%dx%d", train.Name, train.N, test.N, train.C, train.H, train.W)
	s.Model, err = s.buildModel(model.Config{Kind: c.Model.Kind, Hidden: c.Model.Hidden, Depth: c.Model.Depth,
		Input: [3]int{train.C, train.H, train.W}, Classes: train.Classes})
	if err != nil {
		return err
	}
	if !c.Model.resnet() {
		s.Model.Config.Depth = 0
	}
	return nil
}

// loadTokens reads the shards of --data and builds the GPT for their
// vocabulary.
func (s *Session) loadTokens() error {
	c := &s.Cfg
	ts, err := data.LoadTokens(c.Data.Dir, c.Model.Vocab)
	if err != nil {
		return fmt.Errorf("--data %s: %v", c.Data.Dir, err)
	}
	t := c.Model.Context
	train, val := data.Windows{Tokens: ts.Train, T: t}, data.Windows{Tokens: ts.Val, T: t}
	if train.Len() == 0 || val.Len() == 0 {
		return fmt.Errorf("--context %d: longer than the data (%d training and %d validation tokens in %s): lower --context", t, len(ts.Train), len(ts.Val), c.Data.Dir)
	}
	s.trainSet, s.testSet = tokens{train}, tokens{val}
	s.tokenizer = ts.Tokenizer.Name
	v := ts.Tokenizer.Vocab
	s.dataName = fmt.Sprintf("%s: %d training and %d validation tokens (%s, vocabulary %d): %d and %d windows of %d", ts.Name,
		len(ts.Train), len(ts.Val), ts.Tokenizer.Name, v, train.Len(), val.Len(), t)
	s.Model, err = s.buildModel(model.Config{Kind: "gpt", Classes: v, GPT: &model.GPTConfig{Layers: c.Model.Layers, Heads: c.Model.Heads,
		Dim: c.Model.Dim, Context: t, Vocab: v, VocabPadded: model.PadVocab(v)}})
	return err
}

// loadFolders opens the images --data and --val-data name, image
// folders (torchvision's ImageFolder layout) or tar shards (WebDataset's),
// and builds the model for their classes and --image-size.
func (s *Session) loadFolders() error {
	c := &s.Cfg
	d := &c.Data
	train, val, err := s.openImages()
	if err != nil {
		return err
	}
	size, resize := d.ImageSize, d.Resize
	if size == 0 {
		size = 224
	}
	if resize == 0 {
		resize = (size*256 + 112) / 224
	}
	workers := d.Workers
	if workers == 0 {
		workers = max(1, model.Threads())
	}
	crop, flip := c.augment()
	var skip func(string, error)
	if d.SkipBad {
		var mu sync.Mutex
		seen := map[string]bool{}
		skip = func(path string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if !seen[path] {
				seen[path] = true
				s.badImages.Add(1)
				fmt.Fprintf(s.errw, "train: rank %d: skipping an image that does not decode (--skip-bad; %d on this rank so far): %v\n", s.Job.Rank(), len(seen), err)
			}
		}
	}
	mean, std := d.Mean, d.Std
	if mean == [3]float32{} && std == [3]float32{} {
		mean, std = data.ImageNetMean, data.ImageNetStd
	}
	view := func(training bool) data.View {
		return data.View{Size: size, Resize: resize, Train: training, Crop: crop, Flip: flip,
			Mean: mean, Std: std, Seed: c.Optim.Seed, Workers: workers, Skip: skip}
	}
	keys := c.Observe.SampleLog != ""
	s.trainSet, s.testSet = train.source(view(true), keys), val.source(view(false), false)
	how := "training view: Resize " + fmt.Sprint(resize) + " and CenterCrop"
	s.augmentDesc = "none (Resize and CenterCrop)"
	if crop {
		how, s.augmentDesc = "training view: RandomResizedCrop", "RandomResizedCrop"
	}
	if flip {
		how += " and flip"
		s.augmentDesc = strings.TrimPrefix(s.augmentDesc+" and flip", "none (Resize and CenterCrop) and ")
	}
	order := ""
	if train.shards != nil {
		order = fmt.Sprintf(", read in order (--shuffle=false)")
		if !d.Ordered {
			order = fmt.Sprintf(", shards in a new order each epoch and a shuffle buffer of %d per rank", d.ShuffleBuffer)
		}
	}
	what := train.desc + " and " + val.desc
	if train.folder != nil && val.folder != nil {
		what = "image folders " + train.folder.Root + " and " + val.folder.Root
	}
	s.dataName = fmt.Sprintf("%s: %d training and %d validation images in %d classes%s, %dx%d views (%s; evaluation: Resize %d, CenterCrop %d), %d decoding goroutine(s); JPEG: %s",
		what, train.n, val.n, train.classes, order, size, size, how, resize, size, workers, data.JPEGDecoder())
	s.Model, err = s.buildModel(model.Config{Kind: c.Model.Kind, Hidden: c.Model.Hidden, Depth: c.Model.Depth,
		Input: [3]int{3, size, size}, Classes: train.classes})
	if err != nil {
		return err
	}
	if !c.Model.resnet() {
		s.Model.Config.Depth = 0
	}
	return nil
}

// imageSplit is one split of the images: a folder or tar shards.
type imageSplit struct {
	folder     *data.Folder
	shards     *data.TarShards
	desc       string
	n, classes int
	classNames []string // a folder's
}

func (sp imageSplit) source(v data.View, keys bool) source {
	if sp.shards != nil {
		return tarImages{&data.TarSet{TarShards: sp.shards, View: v, Keys: keys}}
	}
	return folderImages{&data.ImageSet{Folder: sp.folder, View: v}}
}

// openImages opens the training and validation splits: image folders
// (--data's train/ and val/, or --data and --val-data) or tar shards
// (--data's train-*.tar and val-*.tar, or --data and --val-data
// patterns); the two may differ in kind, not in classes.
func (s *Session) openImages() (train, val imageSplit, err error) {
	d := &s.Cfg.Data
	open := func(path, split string) (imageSplit, error) {
		if pat, ok := data.ShardPattern(path, split); ok {
			t, err := data.OpenTarShards(pat)
			if err != nil {
				return imageSplit{}, err
			}
			desc := fmt.Sprintf("tar shards %s (%d)", pat, len(t.Paths))
			if t.Scanned > 0 {
				desc = fmt.Sprintf("tar shards %s (%d, %d of them counted by reading them: not made by train data pack)", pat, len(t.Paths), t.Scanned)
			}
			return imageSplit{shards: t, desc: desc, n: t.N(), classes: t.Classes}, nil
		}
		f, err := data.ScanFolder(path)
		if err != nil {
			return imageSplit{}, err
		}
		return imageSplit{folder: f, desc: "image folder " + path, n: len(f.Paths), classes: len(f.Classes), classNames: f.Classes}, nil
	}
	tdir, vdir := d.Dir, d.ValDir
	if d.tarShards() {
		if vdir == "" {
			if _, ok := data.ShardPattern(d.Dir, "val"); !ok || strings.HasSuffix(d.Dir, ".tar") {
				return train, val, fmt.Errorf("--data %s: tar shards for training; give the validation images with --val-data (shards or a folder)", d.Dir)
			}
			vdir = d.Dir
		}
	} else if vdir == "" {
		tdir, vdir = filepath.Join(d.Dir, "train"), filepath.Join(d.Dir, "val")
	}
	if train, err = open(tdir, "train"); err != nil {
		return train, val, err
	}
	if val, err = open(vdir, "val"); err != nil {
		return train, val, err
	}
	switch {
	case train.classNames != nil && val.classNames != nil && !slices.Equal(train.classNames, val.classNames):
		return train, val, fmt.Errorf("image folders %s and %s have different classes (%d and %d folders): a label must mean the same class in both",
			tdir, vdir, train.classes, val.classes)
	case val.classes > train.classes:
		return train, val, fmt.Errorf("%s has %d classes, the training images %s only %d: a label must mean the same class in both", val.desc, val.classes, train.desc, train.classes)
	}
	return train, val, nil
}
