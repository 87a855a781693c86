package data

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shardBytes is a shard built by hand from llm.c's description: 256 int32
// (magic, version, count), then the tokens as uint16.
func shardBytes(magic, version, count int32, tokens []uint16) []byte {
	b := make([]byte, 1024+2*len(tokens))
	binary.LittleEndian.PutUint32(b[0:], uint32(magic))
	binary.LittleEndian.PutUint32(b[4:], uint32(version))
	binary.LittleEndian.PutUint32(b[8:], uint32(count))
	for i, t := range tokens {
		binary.LittleEndian.PutUint16(b[1024+2*i:], t)
	}
	return b
}

// TestShardRoundTrip: WriteShard writes exactly llm.c's layout, and
// ReadShard reads it back.
func TestShardRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ShardName("kjv", "train", 0))
	tokens := []uint16{50256, 1870, 1793, 531, 0, 65535 - 1}
	if err := WriteShard(p, tokens); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if want := shardBytes(20240520, 1, 6, tokens); !slices.Equal(b, want) {
		t.Fatalf("file bytes differ from llm.c's layout:\n%x\n%x", b[:16], want[:16])
	}
	got, err := ReadShard(p, 65536)
	if err != nil || !slices.Equal(got, tokens) {
		t.Fatalf("read back %v, %v", got, err)
	}
	if filepath.Base(p) != "kjv_train_000000.bin" || ShardName("a_b", "val", 12) != "a-b_val_000012.bin" {
		t.Errorf("names: %s, %s", filepath.Base(p), ShardName("a_b", "val", 12))
	}
}

// TestBadShards: each defect is an error naming the file and the defect.
func TestBadShards(t *testing.T) {
	dir := t.TempDir()
	good := shardBytes(20240520, 1, 3, []uint16{1, 2, 3})
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "shorter than its 1024-byte header"},
		{"magic", shardBytes(20240521, 1, 3, []uint16{1, 2, 3}), "magic 20240521"},
		{"version", shardBytes(20240520, 2, 3, []uint16{1, 2, 3}), "version 2"},
		{"truncated", good[:len(good)-1], "truncated or padded"},
		{"count larger than the file", shardBytes(20240520, 1, 1<<30, []uint16{1}), "truncated or padded"},
		{"negative count", shardBytes(20240520, 1, -1, nil), "-1 tokens"},
		{"token above the vocabulary", shardBytes(20240520, 1, 3, []uint16{1, 50257, 3}), "token 50257 at position 1"},
	} {
		p := filepath.Join(dir, tc.name+".bin")
		os.WriteFile(p, tc.b, 0o644)
		_, err := ReadShard(p, 50257)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming the file and %q", tc.name, err, tc.want)
		}
	}
}

// TestLoadTokens: the splits' shards in name order, the vocabulary from
// tokenizer.json (GPT-2's without one; --vocab overrides), and the
// missing split named.
func TestLoadTokens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	os.Mkdir(dir, 0o755)
	WriteShard(filepath.Join(dir, ShardName("tiny", "train", 1)), []uint16{4, 5})
	WriteShard(filepath.Join(dir, ShardName("tiny", "train", 0)), []uint16{1, 2, 3})
	WriteShard(filepath.Join(dir, ShardName("tiny", "val", 0)), []uint16{9})
	ts, err := LoadTokens(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ts.Train, []uint16{1, 2, 3, 4, 5}) || !slices.Equal(ts.Val, []uint16{9}) || ts.Tokenizer != GPT2 || ts.Name != "tiny" {
		t.Errorf("%+v", ts)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"tokenizer": "bytes", "vocab": 256, "eot": -1}`), 0o644)
	if ts, err = LoadTokens(dir, 0); err != nil || ts.Tokenizer.Vocab != 256 || ts.Tokenizer.Name != "bytes" {
		t.Errorf("with tokenizer.json: %+v %v", ts, err)
	}
	if _, err := LoadTokens(dir, 4); err == nil || !strings.Contains(err.Error(), "tiny_train_000001.bin: token 4 at position 0") {
		t.Errorf("--vocab 4: %v", err)
	}
	os.Remove(filepath.Join(dir, ShardName("tiny", "val", 0)))
	if _, err := LoadTokens(dir, 0); err == nil || !strings.Contains(err.Error(), "no val shards") {
		t.Errorf("no val shards: %v", err)
	}
}

// FuzzReadShard: any bytes give the tokens the header promises, all below
// the vocabulary, or an error; never a panic or an allocation the file's
// size does not justify. Seeds: testdata/fuzz/FuzzReadShard and the cases
// below.
func FuzzReadShard(f *testing.F) {
	f.Add(shardBytes(20240520, 1, 3, []uint16{1, 2, 3}))
	f.Add(shardBytes(20240520, 1, 1<<30, []uint16{1}))
	f.Add(shardBytes(20240520, 1, 2, []uint16{7, 300}))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "in.bin")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var tokens []uint16
		var err error
		allocBound(t, len(b), func() { tokens, err = ReadShard(p, 256) })
		if err != nil {
			return
		}
		if 1024+2*len(tokens) != len(b) {
			t.Fatalf("%d tokens from %d bytes", len(tokens), len(b))
		}
		for _, tk := range tokens {
			if tk >= 256 {
				t.Fatalf("token %d accepted with a vocabulary of 256", tk)
			}
		}
	})
}

// TestWindows: window k is tokens k*T .. k*T+T-1 and its targets the next
// ones; the last partial window is left out.
func TestWindows(t *testing.T) {
	w := Windows{Tokens: []uint16{10, 11, 12, 13, 14, 15, 16, 17}, T: 3}
	if w.Len() != 2 {
		t.Fatalf("Len %d, want 2 ((8-1)/3)", w.Len())
	}
	x, y := make([]float32, 6), make([]int32, 6)
	w.Batch(x, y, []int{1, 0})
	if !slices.Equal(x, []float32{13, 14, 15, 10, 11, 12}) || !slices.Equal(y, []int32{14, 15, 16, 11, 12, 13}) {
		t.Errorf("x %v y %v", x, y)
	}
	if (Windows{Tokens: []uint16{1, 2, 3}, T: 3}).Len() != 0 {
		t.Error("a window without its last target counted")
	}
}
