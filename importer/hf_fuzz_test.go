package importer

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FuzzHFConfig feeds arbitrary config.json (and generation_config.json)
// bytes to the architecture parser: it must return an Arch or an error,
// never panic, and any Arch it returns must validate.
func FuzzHFConfig(f *testing.F) {
	_, file, _, _ := runtime.Caller(0)
	tiny := filepath.Join(filepath.Dir(file), "..", "..", "shared", "fixtures", "tiny")
	if entries, err := os.ReadDir(tiny); err == nil {
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join(tiny, e.Name(), "config.json")); err == nil {
				f.Add(b, []byte(`{"eos_token_id": [2, 3]}`))
			}
		}
	}
	f.Add([]byte(`{"model_type":"llama","vocab_size":8,"hidden_size":4,"num_hidden_layers":1,"num_attention_heads":1,"intermediate_size":4,"rope_scaling":{"type":"llama3","factor":8}}`), []byte(`{}`))
	f.Add([]byte(`{"model_type":"gemma3_text","vocab_size":8,"hidden_size":4,"num_hidden_layers":7,"num_attention_heads":1,"intermediate_size":4,"sliding_window_pattern":0}`), []byte(``))
	f.Add([]byte(`{"model_type":"qwen3_next","vocab_size":8,"hidden_size":4,"num_hidden_layers":4,"num_attention_heads":1,"num_experts":3,"num_experts_per_tok":9}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, cfg, gen []byte) {
		c, err := hfParseConfig(cfg)
		if err != nil {
			return
		}
		a, err := hfArch(&c)
		if err != nil {
			return
		}
		if err := hfSpecialTokens(&a, &c, gen); err != nil {
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("hfArch returned an invalid arch: %v\n%s", err, cfg)
		}
	})
}
