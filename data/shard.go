package data

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Token shards in llm.c's format (dev/data/data_common.py): a header of
// 256 int32 (little-endian: magic 20240520, version 1, the token count,
// the rest zero), then the tokens as uint16. llm.c's own scripts
// (FineWeb, TinyStories, tinyshakespeare) write it, so their shards can be
// trained on as they are; `train tokenize` writes it too, with files named
// NAME_train_NNNNNN.bin and NAME_val_NNNNNN.bin and a tokenizer.json
// beside them.
const (
	ShardMagic   = 20240520
	ShardVersion = 1
	shardHeader  = 256 * 4 // bytes
)

// WriteShard writes tokens to path in the shard format, atomically (a
// temporary file in the same directory, renamed), so a killed tokenizer
// leaves no half shard that looks whole.
func WriteShard(path string, tokens []uint16) error {
	return writeAtomic(path, func(w *bufio.Writer) error {
		var hdr [256]int32
		hdr[0], hdr[1], hdr[2] = ShardMagic, ShardVersion, int32(len(tokens))
		if err := binary.Write(w, binary.LittleEndian, hdr[:]); err != nil {
			return err
		}
		return binary.Write(w, binary.LittleEndian, tokens)
	})
}

// ReadShard reads the shard at path and checks it: the magic, the
// version, a token count that the file's size holds exactly, and every
// token below vocab. Errors name the file and what is wrong with it.
func ReadShard(path string, vocab int) ([]uint16, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	tokens, err := parseShard(bufio.NewReaderSize(f, 1<<20), st.Size(), vocab)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tokens, nil
}

// parseShard reads a shard of size bytes from r; the header is checked
// against the size before anything is allocated.
func parseShard(r io.Reader, size int64, vocab int) ([]uint16, error) {
	var hdr [256]int32
	if err := binary.Read(r, binary.LittleEndian, hdr[:]); err != nil {
		return nil, fmt.Errorf("not a token shard: shorter than its %d-byte header", shardHeader)
	}
	switch {
	case hdr[0] != ShardMagic:
		return nil, fmt.Errorf("not a token shard: magic %d, want %d (llm.c's format: a 256 x int32 header, then uint16 tokens)", hdr[0], ShardMagic)
	case hdr[1] != ShardVersion:
		return nil, fmt.Errorf("token shard version %d, this train reads version %d (uint16 tokens)", hdr[1], ShardVersion)
	case hdr[2] < 0:
		return nil, fmt.Errorf("token shard says it holds %d tokens", hdr[2])
	}
	n := int64(hdr[2])
	if want := shardHeader + 2*n; size != want {
		return nil, fmt.Errorf("truncated or padded token shard: the header says %d tokens (%d bytes in all), the file has %d bytes", n, want, size)
	}
	tokens := make([]uint16, n)
	if err := binary.Read(r, binary.LittleEndian, tokens); err != nil {
		return nil, fmt.Errorf("reading %d tokens: %v", n, err)
	}
	for i, t := range tokens {
		if int(t) >= vocab {
			return nil, fmt.Errorf("token %d at position %d is not below the vocabulary size %d (another tokenizer's shard? see --vocab)", t, i, vocab)
		}
	}
	return tokens, nil
}

// Tokenizer is tokenizer.json, written by `train tokenize` beside its
// shards: which tokenizer made them and the vocabulary's size.
type Tokenizer struct {
	Name  string `json:"tokenizer"` // "gpt2" (GPT-2's BPE) or "bytes"
	Vocab int    `json:"vocab"`
	EOT   int    `json:"eot"` // the token that starts every document
}

// GPT2 is GPT-2's tokenizer: what shards without a tokenizer.json (llm.c's
// own) are taken to be.
var GPT2 = Tokenizer{Name: "gpt2", Vocab: 50257, EOT: 50256}

// Tokens is a tokenized corpus: the training and validation tokens (each
// split's shards in name order, concatenated) and the tokenizer.
type Tokens struct {
	Train, Val []uint16
	Tokenizer  Tokenizer
	Name       string
}

// LoadTokens reads the shards in dir: *_train_*.bin and *_val_*.bin, with
// dir/tokenizer.json saying the vocabulary (GPT-2's when it is absent);
// vocab > 0 overrides the vocabulary (--vocab).
func LoadTokens(dir string, vocab int) (*Tokens, error) {
	t := &Tokens{Tokenizer: GPT2, Name: filepath.Base(filepath.Clean(dir))}
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &t.Tokenizer); err != nil || t.Tokenizer.Vocab <= 0 {
			return nil, fmt.Errorf("%s: not a tokenizer description (want {\"tokenizer\": ..., \"vocab\": N}): %v", filepath.Join(dir, "tokenizer.json"), err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	if vocab > 0 {
		t.Tokenizer.Vocab = vocab
	}
	if t.Tokenizer.Vocab > 1<<16 {
		return nil, fmt.Errorf("%s: vocabulary %d does not fit shards of uint16 tokens", dir, t.Tokenizer.Vocab)
	}
	for _, split := range []struct {
		name string
		dst  *[]uint16
	}{{"train", &t.Train}, {"val", &t.Val}} {
		paths, err := filepath.Glob(filepath.Join(dir, "*_"+split.name+"_*.bin"))
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("%s: no %s shards (*_%s_*.bin): make them with train tokenize", dir, split.name, split.name)
		}
		sort.Strings(paths)
		for _, p := range paths {
			tokens, err := ReadShard(p, t.Tokenizer.Vocab)
			if err != nil {
				return nil, err
			}
			*split.dst = append(*split.dst, tokens...)
		}
	}
	return t, nil
}

// ShardName is the file of shard k of split ("train" or "val") for a
// corpus called name.
func ShardName(name, split string, k int) string {
	return fmt.Sprintf("%s_%s_%06d.bin", strings.ReplaceAll(name, "_", "-"), split, k)
}

// Windows are a token sequence's samples for a language model: window k
// is the T tokens from k*T on and, as its targets, the T tokens after
// each (so windows overlap by the one token that is the last one's
// target). Every token is an input once per pass; the sampler permutes
// window numbers per epoch, as it permutes images.
type Windows struct {
	Tokens []uint16
	T      int
}

// Len is the number of whole windows.
func (w Windows) Len() int {
	if w.T <= 0 || len(w.Tokens) <= w.T {
		return 0
	}
	return (len(w.Tokens) - 1) / w.T
}

// Batch writes windows idx as inputs x (len(idx), T) token ids as float32
// and targets y (len(idx), T).
func (w Windows) Batch(x []float32, y []int32, idx []int) {
	t := w.T
	for s, k := range idx {
		in := w.Tokens[k*t : k*t+t+1]
		for j := range t {
			x[s*t+j] = float32(in[j])
			y[s*t+j] = int32(in[j+1])
		}
	}
}
