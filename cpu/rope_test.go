package cpu

import (
	"encoding/json"
	"github.com/cortiq/cortiq/fixtures"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
)

// testdata/rope holds tiny Llama checkpoints with scaled RoPE and their
// transformers logits (testdata/gen_rope_fixtures.py). Each is checked as
// written (transformers-5 rope_parameters) and rewritten in the
// transformers-4 style (top-level rope_theta + rope_scaling).
func TestParityRopeScaling(t *testing.T) {
	for _, name := range []string{"llama3", "yarn", "linear"} {
		dir := filepath.Join("testdata", "rope", name)
		t.Run(name, func(t *testing.T) {
			m, err := importer.FromHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.Arch.Layers[0].Attn.Rope.Scaling.Type; got != name {
				t.Fatalf("scaling type %q", got)
			}
			ref := fixtures.LoadReference(t, dir)
			checkParity(t, m, ref)

			// Negative control: without the scaling the logits must be off,
			// or this fixture would not test it.
			for i := range m.Arch.Layers {
				m.Arch.Layers[i].Attn.Rope.Scaling = model.RopeScaling{}
			}
			b, err := New(m, Options{})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := b.NewSession(len(ref.InputIDs))
			lg, _ := s.Forward(ref.InputIDs, true)
			if d, _ := maxAbsDiff(lg, ref.Logits); d < 1e-3 {
				t.Errorf("unscaled rope is within %.3g of the reference: the fixture does not exercise %s", d, name)
			}
		})
		t.Run(name+"/transformers4", func(t *testing.T) {
			tmp := t.TempDir()
			var cfg map[string]any
			b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			rp := cfg["rope_parameters"].(map[string]any)
			delete(cfg, "rope_parameters")
			cfg["rope_theta"] = rp["rope_theta"]
			delete(rp, "rope_theta")
			rp["type"] = rp["rope_type"] // some hub configs say "type"
			delete(rp, "rope_type")
			cfg["rope_scaling"] = rp
			b, _ = json.Marshal(cfg)
			os.WriteFile(filepath.Join(tmp, "config.json"), b, 0o644)
			os.Symlink(filepath.Join(mustAbs(t, dir), "model.safetensors"), filepath.Join(tmp, "model.safetensors"))
			m, err := importer.FromHF(tmp)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkParity(t, m, fixtures.LoadReference(t, dir))
		})
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
