package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/diffusion"
)

func postImages(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/v1/images/generations", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("response %q: %v", b, err)
	}
	return resp.StatusCode, v
}

// TestImagesGenerations: POST /v1/images/generations on a tiny random
// Z-Image returns n PNGs of the asked size as b64_json; the same seed gives
// the same picture; bad requests are 400s naming the parameter.
func TestImagesGenerations(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "zimage")
	if err := diffusion.WriteSynthetic(dir, diffusion.TinySynth()); err != nil {
		t.Fatal(err)
	}
	p, err := diffusion.Open(dir, diffusion.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ts := startServer(t, Config{}, nil)
	if name := ts.AddImageModel("zimage", FromPipeline(p)); name != "zimage" {
		t.Fatalf("registered as %q", name)
	}

	req := `{"model": "zimage", "prompt": "a red fox", "size": "64x48", "n": 2, "steps": 2, "seed": 5, "response_format": "b64_json"}`
	code, v := postImages(t, ts.URL, req)
	if code != 200 {
		t.Fatalf("status %d: %v", code, v)
	}
	data, _ := v["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("%d images, want 2", len(data))
	}
	var pngs [][]byte
	for _, d := range data {
		b, err := base64.StdEncoding.DecodeString(d.(map[string]any)["b64_json"].(string))
		if err != nil {
			t.Fatal(err)
		}
		im, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if r := im.Bounds(); r.Dx() != 64 || r.Dy() != 48 {
			t.Errorf("image %dx%d, want 64x48", r.Dx(), r.Dy())
		}
		pngs = append(pngs, b)
	}
	if bytes.Equal(pngs[0], pngs[1]) {
		t.Error("the two images of one request are equal (seeds should differ)")
	}
	_, v2 := postImages(t, ts.URL, strings.Replace(req, `"n": 2`, `"n": 1`, 1))
	b, _ := base64.StdEncoding.DecodeString(v2["data"].([]any)[0].(map[string]any)["b64_json"].(string))
	if !bytes.Equal(b, pngs[0]) {
		t.Error("same seed, different image")
	}

	for _, c := range []struct{ body, param string }{
		{`{"prompt": "x", "size": "60x48", "steps": 1}`, ""},
		{`{"prompt": "x", "size": "big"}`, "size"},
		{`{"size": "64x48"}`, "prompt"},
		{`{"prompt": "x", "n": 9}`, "n"},
		{`{"prompt": "x", "response_format": "url"}`, "response_format"},
		{`{"prompt": "x", "steps": 0}`, "steps"},
		{`{"prompt": "x", "bogus": 1}`, ""},
		{`{"prompt": "` + strings.Repeat("long prompt ", 30) + `", "size": "32x32", "steps": 1}`, ""},
	} {
		code, v := postImages(t, ts.URL, c.body)
		e, _ := v["error"].(map[string]any)
		if code != 400 || e == nil {
			t.Errorf("%s: status %d, %v", c.body, code, v)
			continue
		}
		if c.param != "" && e["param"] != c.param {
			t.Errorf("%s: param %v, want %s", c.body, e["param"], c.param)
		}
	}
	if code, _ := postImages(t, ts.URL, `{"model": "nope", "prompt": "x"}`); code != 404 {
		t.Errorf("unknown model: status %d, want 404", code)
	}
}

// slowImages is an ImageModel that takes delay per step and honours the
// context, for the websocket job's progress and cancel.
type slowImages struct{ delay time.Duration }

func (s slowImages) Generate(ctx context.Context, req ImageRequest, progress func(step, steps int)) ([]byte, error) {
	for i := range req.Steps {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(s.delay):
		}
		if progress != nil {
			progress(i+1, req.Steps)
		}
	}
	return []byte("png:" + req.Prompt), nil
}

// TestWSImagine: the websocket "imagine" job reports every step, then one
// "image"; "cancel" ends a job with an error; bad settings are errors.
func TestWSImagine(t *testing.T) {
	ts := startServer(t, Config{}, nil)
	ts.AddImageModel("img", slowImages{delay: time.Millisecond})
	ws, _ := dialWS(t, ts.WSURL, nil)
	defer ws.Close()
	steps := 3
	ws.WriteJSON(Msg{Type: "imagine", ID: "a", Prompt: "fox", Size: "64x48", Steps: &steps, Seed: 9})
	var got []int
	for {
		m := readMsg(t, ws)
		if m.ID != "a" {
			continue
		}
		if m.Type == "progress" {
			if m.Progress.Stage != "step" || m.Progress.Steps != 3 {
				t.Fatalf("progress %+v", m.Progress)
			}
			got = append(got, m.Progress.Step)
			continue
		}
		if m.Type != "image" {
			t.Fatalf("got %+v", m)
		}
		b, _ := base64.StdEncoding.DecodeString(m.Image.B64PNG)
		if string(b) != "png:fox" || m.Image.Width != 64 || m.Image.Height != 48 || m.Image.Seed != 9 || m.Image.Steps != 3 {
			t.Errorf("image event %+v (%q)", m.Image, b)
		}
		break
	}
	if len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("progress steps %v", got)
	}

	long := 200
	ws.WriteJSON(Msg{Type: "imagine", ID: "b", Prompt: "slow", Steps: &long})
	ws.WriteJSON(Msg{Type: "cancel", ID: "b"})
	for {
		m := readMsg(t, ws)
		if m.ID == "b" && m.Type == "error" {
			if m.Error.Code != "cancelled" {
				t.Errorf("cancelled job: %+v", m.Error)
			}
			break
		}
		if m.ID == "b" && m.Type == "image" {
			t.Fatal("cancelled job finished")
		}
	}
	bad := 0
	ws.WriteJSON(Msg{Type: "imagine", ID: "c", Prompt: "x", Steps: &bad})
	ws.WriteJSON(Msg{Type: "imagine", ID: "d", Prompt: "x", Model: "nope"})
	codes := map[string]string{}
	for len(codes) < 2 {
		m := readMsg(t, ws)
		if m.Type == "error" {
			codes[m.ID] = m.Error.Code
		}
	}
	if codes["c"] != "invalid_request_error" || codes["d"] != "model_not_found" {
		t.Errorf("error codes %v", codes)
	}
}
