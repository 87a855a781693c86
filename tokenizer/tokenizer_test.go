package tokenizer

import (
	"slices"
	"testing"
)

// TestGPT2: encodings published for GPT-2's tokenizer (the issue's
// "Hello world" -> 15496, 995; OpenAI's tiktoken and Hugging Face's
// GPT2Tokenizer give the same ids), and the round trip.
func TestGPT2(t *testing.T) {
	tk, err := New("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Vocab() != 50257 || tk.EOT() != 50256 {
		t.Errorf("vocab %d, eot %d", tk.Vocab(), tk.EOT())
	}
	for text, want := range map[string][]int{
		"Hello world":   {15496, 995},
		" the":          {262},
		"\n":            {198},
		"<|endoftext|>": {27, 91, 437, 1659, 5239, 91, 29}, // ordinary text, not the special token
	} {
		if got := tk.Encode(text); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
	text := "And God said, Let there be light: and there was light. Ünïcödé ✓"
	if got := tk.Decode(tk.Encode(text)); got != text {
		t.Errorf("round trip: %q", got)
	}
}

func TestBytes(t *testing.T) {
	tk, _ := New("bytes")
	if got := tk.Encode("Hé"); !slices.Equal(got, []int{72, 195, 169}) {
		t.Errorf("bytes of Hé: %v", got)
	}
	if tk.Vocab() != 256 || tk.EOT() != -1 || tk.Decode([]int{72, 195, 169}) != "Hé" {
		t.Error("bytes tokenizer")
	}
	if _, err := New("sentencepiece"); err == nil {
		t.Error("unknown tokenizer accepted")
	}
}
