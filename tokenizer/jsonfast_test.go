package tokenizer

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

func TestFastJSON(t *testing.T) {
	vocabs := []string{
		`{"a\u0120b": 1, "\ud83d\ude00": 2, "x\"y": 3, "\/\\\n\t\b\f\r": 4, "é": 5, "\ud800": 6}`,
		` { } `,
		`{"a":1,}`, // invalid: both must reject
		`{"a":1.5}`,
	}
	for _, v := range vocabs {
		var want map[string]int
		wantErr := json.Unmarshal([]byte(v), &want)
		got, err := parseVocab([]byte(v))
		if (err != nil) != (wantErr != nil) || !maps.Equal(got, want) {
			t.Errorf("%s: got %v (%v), want %v (%v)", v, got, err, want, wantErr)
		}
		if fast, ok := fastVocab([]byte(v)); ok && !maps.Equal(fast, want) {
			t.Errorf("%s: fast path %v, want %v", v, fast, want)
		}
	}
	for _, m := range []string{`["a b", "\u0120 \u0120t"]`, `[["a", "b"], ["\u0120", "c d"]]`} {
		var got [][2]string
		if err := parseMerges(json.RawMessage(m), func(a, b string, _ int) { got = append(got, [2]string{a, b}) }); err != nil {
			t.Fatal(err)
		}
		want := [][2]string{{"a", "b"}, {"Ġ", "Ġt"}}
		if m[1] == '[' {
			want = [][2]string{{"a", "b"}, {"Ġ", "c d"}}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", m, got, want)
		}
	}
}
