package e2e

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOPFSReload: a model loaded once comes from OPFS after a page reload,
// with no request for its files at all.
func TestOPFSReload(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	srv := newServer(t, map[string]string{"stories260K": gguf})
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/")
	first := b.mustLoad("stories260K", "", 2*time.Minute)
	if first.FromCache || first.Downloaded == 0 {
		t.Fatalf("first load: fromCache %v, downloaded %d; want a download", first.FromCache, first.Downloaded)
	}
	b.reload()
	srv.clearLog()
	again := b.mustLoad("stories260K", "", 2*time.Minute)
	if !again.FromCache || again.Downloaded != 0 {
		t.Errorf("after reload: fromCache %v, downloaded %d; want the OPFS copy", again.FromCache, again.Downloaded)
	}
	if got := srv.accesses("/models/"); len(got) != 0 {
		t.Errorf("loading from OPFS made %d model requests: %+v", len(got), got)
	}
	res := b.generate(map[string]any{"prompt": "Once upon a time", "maxTokens": 64, "temperature": 0}, 2*time.Minute)
	if got := "Once upon a time" + res.Text; got != storiesText {
		t.Errorf("from OPFS: %q", got)
	}
	// Even with the server gone (the page is up already) the model loads.
	srv.stop()
	if _, err := b.load("stories260K", "", time.Minute); err != nil {
		t.Errorf("offline load from OPFS: %v", err)
	}
}

// TestResumeAfterKill: the server dies mid-download and comes back; the next
// load resumes with a Range request from where the first stopped, and the
// file verifies against the listing's sha256.
func TestResumeAfterKill(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	digest, size := fileSHA(t, gguf)
	srv := newServer(t, nil)
	srv.addOwn("slow", gguf, honest)
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/")

	srv.setThrottle(256 << 10)
	type outcome struct {
		info *loadInfo
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		info, err := b.load("slow", `{retries: 0, checkpoint: 65536}`, 2*time.Minute)
		done <- outcome{info, err}
	}()
	// Kill once a good part of the file is through.
	deadline := time.Now().Add(time.Minute)
	for srv.bytesSent("/models/slow/stories260K.gguf") < size/2 {
		if time.Now().After(deadline) {
			t.Fatalf("the download did not progress: %+v", srv.accesses("/models/"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	sent := srv.bytesSent("/models/slow/stories260K.gguf")
	srv.stop()
	first := <-done
	if first.err == nil {
		t.Fatalf("load survived the server's death: %+v", first.info)
	}
	t.Logf("killed after %d of %d bytes: %v", sent, size, first.err)

	var cached []struct {
		Key      string   `json:"key"`
		Complete bool     `json:"complete"`
		Partial  []string `json:"partial"`
	}
	b.mustEval(`cortiq.cached()`, &cached, time.Minute)
	t.Logf("OPFS after the kill: %+v", cached)

	srv.setThrottle(0)
	srv.clearLog()
	srv.start()
	info := b.mustLoad("slow", `{retries: 0, checkpoint: 65536, onProgress: p => (window.__prog = window.__prog || []).push(p)}`, 2*time.Minute)
	var prog []struct {
		File    string  `json:"file"`
		Done    float64 `json:"done"`
		Total   float64 `json:"total"`
		Resumed float64 `json:"resumed"`
	}
	b.mustEval(`window.__prog || []`, &prog, time.Minute)
	if len(prog) == 0 {
		t.Errorf("no progress events")
	} else if last := prog[len(prog)-1]; last.Done != float64(size) || last.Total != float64(size) || last.Resumed <= 0 {
		t.Errorf("last progress event %+v, want done = total = %d with resumed bytes", last, size)
	}
	var from int64 = -1
	for _, a := range srv.accesses("/models/slow/stories260K.gguf") {
		if v, ok := strings.CutPrefix(a.Range, "bytes="); ok {
			from, _ = strconv.ParseInt(strings.TrimSuffix(v, "-"), 10, 64)
		}
	}
	if from <= 0 {
		t.Fatalf("the second load sent no Range header: %+v", srv.accesses("/models/"))
	}
	if from > sent {
		t.Errorf("resumed at %d, but only %d bytes were sent", from, sent)
	}
	if info.Resumed != from {
		t.Errorf("load reports %d resumed bytes, the Range asked from %d", info.Resumed, from)
	}
	if len(info.Files) != 1 || info.Files[0].SHA256 != digest || info.Files[0].Verified != "sha256" {
		t.Errorf("files %+v, want the sha256-verified %s", info.Files, digest)
	}
	t.Logf("resumed at byte %d of %d (%d sent before the kill); verified %s", from, size, sent, info.Files[0].Verified)
	res := b.generate(map[string]any{"prompt": "Once upon a time", "maxTokens": 64, "temperature": 0}, 2*time.Minute)
	if got := "Once upon a time" + res.Text; got != storiesText {
		t.Errorf("after resume: %q", got)
	}
}

// TestHostileServer: a wrong length, corrupted bytes or a wrong hash give a
// clear error, in the UI too, and leave nothing a later load would trust:
// once the server behaves, the file is downloaded again from byte 0.
func TestHostileServer(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	srv := newServer(t, nil)
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/")
	for _, c := range []struct {
		name string
		mode hostile
		kind string // the error kind cortiq.load reports
		text string // in the message
	}{
		{"h-length", wrongLength, "length", "wrong length"},
		{"h-corrupt", corruptByte, "checksum", "checksum mismatch"},
		{"h-etag", wrongETag, "checksum", "checksum mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b.t = t
			srv.addOwn(c.name, gguf, c.mode)
			// Through the UI: the error is shown on the page.
			var status struct {
				Text  string `json:"text"`
				Error bool   `json:"error"`
			}
			b.mustEval(fmt.Sprintf(`(async () => {
				document.getElementById("model").value = %s;
				document.getElementById("load").click();
				const st = document.getElementById("status");
				for (let i = 0; i < 600 && !/failed|loaded in/.test(st.textContent); i++) await new Promise(r => setTimeout(r, 100));
				return {text: st.textContent, error: st.classList.contains("error")};
			})()`, jsString(c.name)), &status, 2*time.Minute)
			if !status.Error || !strings.Contains(status.Text, c.text) {
				t.Errorf("UI status %q (error style %v), want an error saying %q", status.Text, status.Error, c.text)
			}
			t.Logf("UI: %s", status.Text)
			// Through the API: the kind.
			_, err := b.load(c.name, `{retries: 0}`, time.Minute)
			var le *loadError
			if !errors.As(err, &le) || le.kind != c.kind {
				t.Errorf("load error %v, want kind %q", err, c.kind)
			}
			var cached []struct {
				Key      string   `json:"key"`
				Complete bool     `json:"complete"`
				Partial  []string `json:"partial"`
			}
			b.mustEval(`cortiq.cached()`, &cached, time.Minute)
			for _, m := range cached {
				if m.Key == c.name && (m.Complete || len(m.Partial) > 0) {
					t.Errorf("after the failure OPFS holds %+v", m)
				}
			}
			// The server mends its ways: a fresh, verified download.
			srv.setMode(c.name, honest)
			srv.clearLog()
			info := b.mustLoad(c.name, "", time.Minute)
			for _, a := range srv.accesses("/models/" + c.name + "/") {
				if a.Range != "" {
					t.Errorf("the good download resumed a bad part: Range %q", a.Range)
				}
			}
			if info.FromCache || len(info.Files) != 1 || info.Files[0].Verified != "sha256" {
				t.Errorf("good load: %+v", info)
			}
		})
	}
}

// TestQuota: a model that does not fit the origin's storage is refused up
// front, naming the bytes needed and available, with nothing written.
func TestQuota(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	_, size := fileSHA(t, gguf)
	srv := newServer(t, map[string]string{"stories260K": gguf})
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/")
	var est struct {
		Usage, Quota float64
		Persisted    bool
	}
	b.mustEval(`cortiq.storage()`, &est, time.Minute)
	t.Logf("storage estimate: usage %.0f, quota %.0f, persisted %v", est.Usage, est.Quota, est.Persisted)
	_, err := b.load("stories260K", `{availableBytes: 1000}`, time.Minute)
	var le *loadError
	want := fmt.Sprintf("need %d bytes, 1000 available", size)
	if !errors.As(err, &le) || le.kind != "quota" || !strings.Contains(le.msg, want) {
		t.Fatalf("load error %v, want kind quota saying %q", err, want)
	}
	t.Logf("%v", err)
	if got := srv.accesses("/models/stories260K/stories260K.gguf"); len(got) != 0 {
		t.Errorf("the file was requested despite the quota: %+v", got)
	}
}

// TestResumeAfterReload: the page reloads mid-download (the Worker dies with
// its OPFS handles); the next load resumes the part with a Range request.
func TestResumeAfterReload(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	_, size := fileSHA(t, gguf)
	srv := newServer(t, nil)
	srv.addOwn("slow", gguf, honest)
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/")
	srv.setThrottle(256 << 10)
	// Start the load without waiting for it.
	var started bool
	b.mustEval(`(cortiq.load("slow", {retries: 0, checkpoint: 65536}).catch(() => {}), true)`, &started, time.Minute)
	deadline := time.Now().Add(time.Minute)
	for srv.bytesSent("/models/slow/stories260K.gguf") < size/2 {
		if time.Now().After(deadline) {
			t.Fatalf("the download did not progress")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.reload()
	srv.setThrottle(0)
	srv.clearLog()
	info := b.mustLoad("slow", `{retries: 0}`, 2*time.Minute)
	var from int64 = -1
	for _, a := range srv.accesses("/models/slow/stories260K.gguf") {
		if v, ok := strings.CutPrefix(a.Range, "bytes="); ok {
			from, _ = strconv.ParseInt(strings.TrimSuffix(v, "-"), 10, 64)
		}
	}
	if from <= 0 || info.Resumed != from || info.Files[0].Verified != "sha256" {
		t.Errorf("after the reload: Range from %d, resumed %d, files %+v; want a verified resume", from, info.Resumed, info.Files)
	}
	t.Logf("resumed at byte %d of %d after a reload", from, size)
}
