package tokenizer

import (
	"github.com/cortiq/cortiq/fixtures"
	"path/filepath"
	"testing"
)

func BenchmarkLoadLlama3(b *testing.B) {
	path := filepath.Join(fixtures.Dir(b), "fixtures", "tokenizers", "llama3.tokenizer.json.gz")
	for b.Loop() {
		if _, err := FromFile(path); err != nil {
			b.Fatal(err)
		}
	}
}
