package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"train/data"
	"train/tokenizer"
)

// tokenizeCommand turns text into token shards in llm.c's format.
var tokenizeCommand = &cli.Command{
	Name:  "tokenize",
	Usage: "encode UTF-8 text with GPT-2's BPE (or bytes) into llm.c token shards: DIR/NAME_val_*.bin, DIR/NAME_train_*.bin and DIR/tokenizer.json",
	UsageText: "train tokenize --out DIR [--bytes] [--val-tokens 32768] [--doc-separator %] FILE... (- reads standard input)\n" +
		"Each file (or each part between --doc-separator lines) is a document, starting with <|endoftext|>; the first\n" +
		"--val-tokens tokens are the validation split, as llm.c's scripts do.",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "out", Required: true, Usage: "directory for the shards (made if absent); its name names them"},
		&cli.BoolFlag{Name: "bytes", Usage: "a 256-token vocabulary of raw bytes instead of GPT-2's BPE"},
		&cli.IntFlag{Name: "val-tokens", Value: 32768, Usage: "tokens of the validation split, from the start"},
		&cli.IntFlag{Name: "shard-tokens", Value: 100_000_000, Usage: "tokens per shard at most"},
		&cli.StringFlag{Name: "doc-separator", Usage: "a line that separates documents within a file (fortune files: %)"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() == 0 {
			return fmt.Errorf("tokenize: name the text files to encode (- for standard input)")
		}
		if c.Int("val-tokens") < 1 || c.Int("shard-tokens") < 1 {
			return fmt.Errorf("--val-tokens %d --shard-tokens %d: both must be positive", c.Int("val-tokens"), c.Int("shard-tokens"))
		}
		name := "gpt2"
		if c.Bool("bytes") {
			name = "bytes"
		}
		tk, err := tokenizer.New(name)
		if err != nil {
			return err
		}
		var tokens []uint16
		docs := 0
		for _, path := range c.Args().Slice() {
			text, err := readText(path)
			if err != nil {
				return err
			}
			for _, doc := range documents(text, c.String("doc-separator")) {
				if eot := tk.EOT(); eot >= 0 {
					tokens = append(tokens, uint16(eot))
				}
				for _, id := range tk.Encode(doc) {
					tokens = append(tokens, uint16(id))
				}
				docs++
			}
		}
		return writeShards(c.String("out"), tokens, docs, data.Tokenizer{Name: tk.Name(), Vocab: tk.Vocab(), EOT: tk.EOT()},
			c.Int("val-tokens"), c.Int("shard-tokens"), c.App.Writer)
	},
}

// readText reads path (standard input for "-") as UTF-8 text.
func readText(path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(bufio.NewReader(os.Stdin))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// documents splits text at lines equal to sep (none: one document), and
// drops empty ones.
func documents(text, sep string) []string {
	if sep == "" {
		return []string{text}
	}
	var docs []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.TrimRight(line, "\r\n") == sep {
			if strings.TrimSpace(cur.String()) != "" {
				docs = append(docs, cur.String())
			}
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	if strings.TrimSpace(cur.String()) != "" {
		docs = append(docs, cur.String())
	}
	return docs
}

// writeShards writes the first val tokens as the validation split and the
// rest as training shards of at most per tokens, and tokenizer.json.
func writeShards(dir string, tokens []uint16, docs int, tk data.Tokenizer, val, per int, out io.Writer) error {
	if len(tokens) <= val {
		return fmt.Errorf("--val-tokens %d: the text has %d tokens in all, nothing left to train on; lower --val-tokens", val, len(tokens))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out %s: %v", dir, err)
	}
	// Training reads every *_train_*.bin and *_val_*.bin of the directory
	// (data.LoadTokens): shards left from other text, say more of them
	// than this text makes, would be read with these.
	var old []string
	for _, split := range []string{"train", "val"} {
		m, _ := filepath.Glob(filepath.Join(dir, "*_"+split+"_*.bin"))
		old = append(old, m...)
	}
	if len(old) > 0 {
		return fmt.Errorf("--out %s already holds %d token shard(s) (%s...), which training would read with the new ones: remove them, or name another --out", dir, len(old), filepath.Base(old[0]))
	}
	name := filepath.Base(filepath.Clean(dir))
	shards := 0
	for _, split := range []struct {
		name   string
		tokens []uint16
	}{{"val", tokens[:val]}, {"train", tokens[val:]}} {
		for k, lo := 0, 0; lo < len(split.tokens); k, lo = k+1, lo+per {
			if err := data.WriteShard(filepath.Join(dir, data.ShardName(name, split.name, k)), split.tokens[lo:min(lo+per, len(split.tokens))]); err != nil {
				return fmt.Errorf("--out %s: %v", dir, err)
			}
			shards++
		}
	}
	b, _ := json.MarshalIndent(tk, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out %s: %v", dir, err)
	}
	fmt.Fprintf(out, "tokenize: %d document(s), %d tokens (%d validation, %d training) in %d shard(s) in %s, tokenizer %s (vocabulary %d)\n",
		docs, len(tokens), val, len(tokens)-val, shards, dir, tk.Name, tk.Vocab)
	return nil
}
