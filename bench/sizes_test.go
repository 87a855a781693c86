package bench

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"8": 8, "4K": 4096, "4k": 4096, "256M": 256 << 20, "1G": 1 << 30, " 16M ": 16 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if got, _ := ParseSize(FormatSize(want)); got != want {
			t.Errorf("FormatSize(%d) = %q does not read back", want, FormatSize(want))
		}
	}
	for _, bad := range []string{"", "lots", "-4", "4T", "1.5M"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}
