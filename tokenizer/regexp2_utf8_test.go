package tokenizer

import "testing"

// The lookaround path (regexp2) maps rune offsets back to bytes of the
// text itself: invalid UTF-8 used to be repaired first (a 1-byte error
// becoming 3-byte U+FFFD), giving offsets past the end of the text and a
// slice-bounds panic in Encode (a FuzzFromJSON crasher).
func TestRegexp2InvalidUTF8Offsets(t *testing.T) {
	m, err := compilePattern(`\s+(?!\S)|\p{N}{1,3}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(regexp2Matcher); !ok {
		t.Fatalf("pattern compiled to %T, want the regexp2 path", m)
	}
	s := "a b  \xf9\xfe12345 \xc3"
	locs := m.findAll(s, nil)
	want := [][2]int{{3, 4}, {7, 10}, {10, 12}}
	if len(locs) != len(want) {
		t.Fatalf("matches %v, want %v", locs, want)
	}
	for i, l := range locs {
		if l != want[i] {
			t.Errorf("match %d at %v, want %v", i, l, want[i])
		}
	}
}
