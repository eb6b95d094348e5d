package family

import "testing"

// TestRecords checks what the lookups rely on: every name is unique, every
// family written as GGUF is read back as a family, and every record has a
// Hugging Face or a GGUF name.
func TestRecords(t *testing.T) {
	hf, gg := map[string]bool{}, map[string]bool{}
	for _, f := range All {
		if f.HF == "" && f.GGUF == "" {
			t.Errorf("record %+v has no name", f)
		}
		if f.HF != "" {
			if hf[f.HF] {
				t.Errorf("model_type %q has two records", f.HF)
			}
			hf[f.HF] = true
		}
		if f.GGUF != "" {
			if gg[f.GGUF] {
				t.Errorf("GGUF architecture %q has two records", f.GGUF)
			}
			gg[f.GGUF] = true
		}
		if f.GGUFOut != "" {
			if _, ok := GGUF(f.GGUFOut); !ok {
				t.Errorf("%s is written as GGUF %q, which no record reads", f.HF, f.GGUFOut)
			}
		}
		if f.HFWrapper != "" && hf[f.HFWrapper] {
			t.Errorf("wrapper model_type %q is also a family", f.HFWrapper)
		}
	}
	for _, c := range []struct{ name, hf string }{{"gemma3_text", "gemma3_text"}, {"gemma3", "gemma3_text"}, {"gpt-oss", "gpt_oss"}, {"qwen2moe", "qwen2_moe"}} {
		f, ok := Of(c.name)
		if !ok || f.HF != c.hf {
			t.Errorf("Of(%q) = %v, %v; want the %s record", c.name, f, ok, c.hf)
		}
	}
	if _, ok := Of("bert"); ok {
		t.Error(`Of("bert") found a record`)
	}
}

func TestTensorNamesDefault(t *testing.T) {
	n := HFTensors{FFNNorm: "x"}.Names()
	if n.FFNNorm != "x" || n.AttnNorm != "input_layernorm.weight" || n.Experts[2] != "down_proj" || n.FusedQKV != "" {
		t.Errorf("Names() = %+v", n)
	}
}
