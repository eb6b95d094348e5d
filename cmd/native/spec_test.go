package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestCLISpec: --spec ngram and --draft give the plain greedy text word for
// word; --json's final object reports the acceptance rate and the
// effective decode rate (--spec-always: speculating at every step); bad flags and a draft of another vocabulary are
// refused with a message naming them.
func TestCLISpec(t *testing.T) {
	p := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	base := []string{"run", "-m", p, "-p", "Once upon a time", "-n", "64", "--temp", "0", "--backend", "cpu"}
	for _, extra := range [][]string{{"--spec", "ngram"}, {"--draft", p, "--draft-k", "3"}} {
		if out := cortiq(t, nil, append(append([]string{}, base...), extra...)...); out != storiesWant {
			t.Errorf("%v: got\n%q\nwant\n%q", extra, out, storiesWant)
		}
		// --spec-always: drafting at every step, whatever the governor
		// would measure on a busy host.
		out := cortiq(t, nil, append(append([]string{}, base...), append(extra, "--json", "--spec-always")...)...)
		var final struct {
			Done bool `json:"done"`
			Spec *struct {
				Mode     string  `json:"mode"`
				Drafted  int     `json:"drafted"`
				Accepted int     `json:"accepted"`
				Rate     float64 `json:"acceptance_rate"`
				TokS     float64 `json:"effective_tok_s"`
			} `json:"spec"`
		}
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			if err := json.Unmarshal(sc.Bytes(), &final); err != nil {
				t.Fatal(err)
			}
		}
		if !final.Done || final.Spec == nil || final.Spec.Drafted == 0 || final.Spec.TokS <= 0 {
			t.Errorf("%v --json: final spec %+v", extra, final.Spec)
		} else if extra[0] == "--draft" && final.Spec.Rate != 1 {
			t.Errorf("a draft equal to the target: acceptance %.2f", final.Spec.Rate)
		}
	}
	llama := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "llama")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--spec", "lookahead"}, "--spec"},
		{[]string{"--spec", "ngram", "--draft-k", "0"}, "--draft-k"},
		{[]string{"--spec", "ngram", "--draft", p}, "exclude"},
		{[]string{"--draft", llama}, "vocabular"},
		{[]string{"--spec-always"}, "--spec-always"},
	} {
		cmd := exec.Command(cortiqBin, append(append([]string{}, base...), c.args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: %v\n%s", c.args, err, out)
		}
	}
}
