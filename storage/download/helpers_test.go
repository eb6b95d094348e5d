package download

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>8)
	}
	return b
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func FuzzParseSidecar(f *testing.F) {
	f.Add([]byte(`{"version":1,"url":"http://x/y","size":10,"validator":"\"e\"","sha256":"` + strings.Repeat("0", 64) + `","done":3}`))
	f.Add([]byte(`{"version":1,"url":"u","size":-1,"done":0}`))
	f.Add([]byte(`{"version":2,"url":"u","size":1,"done":0}`))
	f.Add([]byte(`{"version":1,"url":"u","size":1,"done":5}`))
	f.Add([]byte(`{"version":1,"url":"u","size":1,"done":0,"extra":1}`))
	f.Add([]byte(`{"version":1,"url":"u","size":1,"done":0} {}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := parseSidecar(b)
		if err != nil {
			return
		}
		again, err := parseSidecar(sc.marshal())
		if err != nil {
			t.Fatalf("re-parsing a marshalled sidecar: %v", err)
		}
		if *again != *sc {
			t.Fatalf("round trip changed %+v into %+v", sc, again)
		}
	})
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-9/*", "bytes 9-5/10", "bytes 0-0/0", "bytes -1-2/3", "bytes 1-2", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, end, total, ok := parseContentRange(s)
		if !ok {
			return
		}
		if start < 0 || end < start || total < -1 || (total >= 0 && end >= total) {
			t.Fatalf("parseContentRange(%q) accepted start %d end %d total %d", s, start, end, total)
		}
	})
}
