// Package tokenizer turns text into token ids and back, offline: GPT-2's
// byte-pair encoding (OpenAI's r50k_base, the vocabulary of GPT-2's 50,257
// tokens; through github.com/pkoukk/tiktoken-go, with its ranks embedded
// by tiktoken-go-loader, so nothing is downloaded) or raw bytes (256
// tokens). `train tokenize` writes shards with it; generation decodes with
// it.
package tokenizer

import (
	"fmt"
	"sync"

	tiktoken "github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Tokenizer encodes text. Vocab is the number of token ids; EOT the id
// that starts every document (GPT-2's <|endoftext|>), -1 for none.
type Tokenizer interface {
	Name() string
	Vocab() int
	EOT() int
	// Encode turns text into ids, special tokens' spellings included as
	// ordinary text (as llm.c's encode_ordinary does).
	Encode(text string) []int
	Decode(ids []int) string
}

// New returns the tokenizer called name: "gpt2" or "bytes".
func New(name string) (Tokenizer, error) {
	switch name {
	case "gpt2":
		return gpt2()
	case "bytes":
		return byteTokenizer{}, nil
	}
	return nil, fmt.Errorf("unknown tokenizer %q: choose gpt2 or bytes", name)
}

var (
	gpt2Once sync.Once
	gpt2Enc  *tiktoken.Tiktoken
	gpt2Err  error
)

// gpt2 loads GPT-2's encoding once per process. tiktoken calls it
// r50k_base: the same ranks, 50,256 merges and <|endoftext|> = 50256.
func gpt2() (Tokenizer, error) {
	gpt2Once.Do(func() {
		tiktoken.SetBpeLoader(loader.NewOfflineLoader())
		gpt2Enc, gpt2Err = tiktoken.GetEncoding("r50k_base")
	})
	if gpt2Err != nil {
		return nil, fmt.Errorf("GPT-2 tokenizer: %v", gpt2Err)
	}
	return bpe{gpt2Enc}, nil
}

type bpe struct{ t *tiktoken.Tiktoken }

func (bpe) Name() string               { return "gpt2" }
func (bpe) Vocab() int                 { return 50257 }
func (bpe) EOT() int                   { return 50256 }
func (b bpe) Encode(text string) []int { return b.t.EncodeOrdinary(text) }
func (b bpe) Decode(ids []int) string  { return b.t.Decode(ids) }

// byteTokenizer is the 256-token vocabulary of raw bytes (UTF-8 as it
// is); it has no end-of-text token.
type byteTokenizer struct{}

func (byteTokenizer) Name() string { return "bytes" }
func (byteTokenizer) Vocab() int   { return 256 }
func (byteTokenizer) EOT() int     { return -1 }

func (byteTokenizer) Encode(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i])
	}
	return ids
}

func (byteTokenizer) Decode(ids []int) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}
