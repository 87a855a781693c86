package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"train/data"
)

// TestTokenize: train tokenize writes llm.c shards whose tokens are GPT-2's
// ("<|endoftext|>" before each document, then "Hello world" -> 15496, 995,
// the ids GPT-2's tokenizer is published with), the first --val-tokens as
// the validation split, and tokenizer.json; --doc-separator splits
// documents; --bytes writes raw bytes; bad input is one line, and a
// directory that holds shards already is refused, untouched.
func TestTokenize(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "in.txt")
	os.WriteFile(text, []byte("Hello world\n%\nHello world\n"), 0o644)
	out := filepath.Join(dir, "hw")
	r := trainRun(t, 0, time.Minute, nil, "tokenize", text, "--out", out, "--val-tokens", "2", "--doc-separator", "%")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	ts, err := data.LoadTokens(out, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Two documents of "Hello world\n": EOT, Hello, world, newline (198).
	all := append(slices.Clone(ts.Val), ts.Train...)
	if want := []uint16{50256, 15496, 995, 198, 50256, 15496, 995, 198}; !slices.Equal(all, want) || len(ts.Val) != 2 {
		t.Errorf("tokens %v (val %v), want %v with the first 2 as val", all, ts.Val, want)
	}
	var tk data.Tokenizer
	b, _ := os.ReadFile(filepath.Join(out, "tokenizer.json"))
	if json.Unmarshal(b, &tk) != nil || tk != data.GPT2 {
		t.Errorf("tokenizer.json: %s", b)
	}
	if !strings.Contains(r.stdout, "2 document(s), 8 tokens (2 validation, 6 training)") {
		t.Errorf("summary: %s", r.stdout)
	}
	r = trainRun(t, 0, time.Minute, nil, "tokenize", "--bytes", "--out", filepath.Join(dir, "b"), "--val-tokens", "1", text)
	ts, err = data.LoadTokens(filepath.Join(dir, "b"), 0)
	if r.code != 0 || err != nil || ts.Tokenizer.Vocab != 256 || string(append(u8(ts.Val), u8(ts.Train)...)) != "Hello world\n%\nHello world\n" {
		t.Errorf("--bytes: exit %d, %v, %+v", r.code, err, ts)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"tokenize", "--out", filepath.Join(dir, "x"), filepath.Join(dir, "missing.txt")}, "missing.txt"},
		{[]string{"tokenize", "--out", filepath.Join(dir, "x"), "--val-tokens", "100", text}, "--val-tokens 100"},
		{[]string{"tokenize", "--out", filepath.Join(dir, "x")}, "name the text files"},
		// Again into hw: training would read its shards with the new ones.
		{[]string{"tokenize", "--out", out, "--val-tokens", "1", text}, "--out " + out + " already holds 2 token shard(s)"},
	} {
		r := trainRun(t, 0, time.Minute, nil, bad.args...)
		if lines := trainLines(r.stderr); r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], bad.want) {
			t.Errorf("%v: exit %d, %q: want one line with %q", bad.args, r.code, r.stderr, bad.want)
		}
		noTrace(t, r)
	}
	if again, err := data.LoadTokens(out, 0); err != nil || !slices.Equal(append(again.Val, again.Train...), all) {
		t.Errorf("the refused run changed %s's tokens: %v", out, err)
	}
}

func u8(v []uint16) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}
