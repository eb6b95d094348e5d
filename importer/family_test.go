package importer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/model/family"
)

// TestFamilyRecordIsEnough: a llama-like family the importer has never
// heard of imports once it has a record, with nothing else changed (the
// llama fixture under another model_type).
func TestFamilyRecordIsEnough(t *testing.T) {
	src := filepath.Join(hfSharedDir(t), "fixtures", "tiny", "llama")
	dir := t.TempDir()
	for _, name := range []string{"model.safetensors", "generation_config.json"} {
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["model_type"] = "cortiq_test_llama"
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FromHF(dir); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("unknown model_type: err %v", err)
	}

	saved := family.All
	defer func() { family.All = saved }()
	family.All = append(slices.Clone(saved), &family.Family{HF: "cortiq_test_llama", Bias: family.BiasConfig})
	got, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	ref, err := FromHF(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	ga, ra := got.Arch, ref.Arch
	ga.Family, ra.Family = "", ""
	gj, _ := json.Marshal(ga)
	rj, _ := json.Marshal(ra)
	gn, rn := got.Weights.Names(), ref.Weights.Names()
	slices.Sort(gn)
	slices.Sort(rn)
	if string(gj) != string(rj) || !slices.Equal(gn, rn) {
		t.Errorf("the record's import differs from llama's:\n%s\n%s", gj, rj)
	}
}
