package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// readmeCommands returns the commands of README.md's ```sh blocks, one per
// line, with trailing comments removed.
func readmeCommands(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	comment := regexp.MustCompile(`\s+#\s.*$`)
	var cmds []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in:
			if c := strings.TrimSpace(comment.ReplaceAllString(line, "")); c != "" && !strings.HasPrefix(c, "#") {
				cmds = append(cmds, c)
			}
		}
	}
	return cmds
}

// TestReadmeExamples runs the README's shell examples as typed, from the
// repository root, on an offline machine: ./bin/cortiq is the binary under
// test, the hub is unreachable, and — as the README says to do offline —
// CORTIQ_MODEL_PATH names a folder holding the models (../shared's). make
// lines are left to make itself (CI runs make test; the binary is built
// here); a serve line is started, its page and API checked, then stopped.
func TestReadmeExamples(t *testing.T) {
	models := filepath.Join(fixtures.Dir(t), "fixtures", "models")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"CORTIQ_MODEL_PATH=" + models, "HF_ENDPOINT=http://127.0.0.1:1"}
	ran := 0
	for _, c := range readmeCommands(t, filepath.Join(root, "README.md")) {
		if strings.HasPrefix(c, "make ") {
			continue
		}
		if !strings.Contains(c, "./bin/cortiq") {
			t.Errorf("README command %q: neither make nor ./bin/cortiq; teach this test to run it", c)
			continue
		}
		ran++
		line := strings.ReplaceAll(c, "./bin/cortiq", cortiqBin)
		if strings.HasPrefix(c, "./bin/cortiq serve") {
			args := strings.Fields(strings.TrimPrefix(c, "./bin/cortiq serve"))
			url, stop := startServe(t, root, env, args...)
			if code, body := httpGet(t, url+"/"); code != 200 || !strings.Contains(body, "<html") {
				t.Errorf("%s: GET / = %d", c, code)
			}
			if code, body := httpGet(t, url+"/v1/models"); code != 200 || !strings.Contains(body, "stories260K") {
				t.Errorf("%s: GET /v1/models = %d %q", c, code, body)
			}
			stop()
			continue
		}
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("README example %q failed: %v\n%s", c, err, out)
		}
	}
	if ran == 0 {
		t.Fatal("no ./bin/cortiq examples found in README.md")
	}
}

// TestNotFoundOffline: a name found nowhere, offline, fails at once with
// where it looked and how to point at a folder, and leaves no empty cache
// folder behind.
func TestNotFoundOffline(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	env := append(envWithout("CORTIQ_MODEL_PATH", "CORTIQ_CACHE", "HF_ENDPOINT"), "CORTIQ_CACHE="+cache, "HF_ENDPOINT=http://127.0.0.1:1")
	cmd := exec.Command(cortiqBin, "run", "-m", "stories260K", "-n", "2")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("run succeeded offline with no local copy:\n%s", out)
	}
	for _, want := range []string{"looked in " + filepath.Join(cache, "models"), "CORTIQ_MODEL_PATH", "cannot reach 127.0.0.1:1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(cache); err == nil {
		t.Errorf("the failed lookup left %s behind", cache)
	}
}
