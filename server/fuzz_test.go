package server

import (
	"encoding/json"
	"testing"
)

func FuzzDecodeMsg(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","protocol":1}`,
		`{"type":"auth","token":"t"}`,
		`{"type":"generate","id":"1","prompt":"Once upon a time","max_tokens":16,"temperature":0.8,"top_k":40,"stop":["\n"]}`,
		`{"type":"generate","id":"2","ids":[1,2,3],"seed":18446744073709551615}`,
		`{"type":"generate","id":"3","messages":[{"role":"user","content":"hi"}],"worker":"browser-1"}`,
		`{"type":"token","id":"job-1","token_id":5,"text":"x"}`,
		`{"type":"done","id":"job-1","result":{"ids":[1],"text":"x","finish_reason":"eos"}}`,
		`{"type":"progress","id":"l","progress":{"stage":"fetching","loaded":1,"total":2}}`,
		`{"type":"register","id":"r","name":"tab","models":["m"],"backend":"webgpu"}`,
		`{"type":"cancel","id":"1"}`, `{"type":"generate","temperature":NaN}`, `{"type":"generate","temperature":1e400}`,
		`{"type":"x","ids":[-1,99999999999999999999]}`, `[]`, `null`, `{"type":"\u0000"}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMsg(data)
		if err != nil {
			if m != nil {
				t.Fatal("message with an error")
			}
			return
		}
		if m.Type == "" || len(m.ID) > maxIDLen || m.MaxTokens < 0 || len(m.IDs) > maxPromptIDs {
			t.Fatalf("invalid message accepted: %+v", m)
		}
		g := m.genRequest()
		if g.Sampling.Temperature < 0 || g.Sampling.TopK < 0 {
			t.Fatalf("negative sampling accepted: %+v", g.Sampling)
		}
		// What the server relays must decode back to the same request.
		b, err := json.Marshal(generateMsg(m.ID, g))
		if err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeMsg(b)
		if err != nil {
			t.Fatalf("relayed message does not decode: %v\n%s", err, b)
		}
		g2 := m2.genRequest()
		if g2.Sampling != g.Sampling || g2.MaxTokens != g.MaxTokens || g2.Prompt != g.Prompt || len(g2.IDs) != len(g.IDs) {
			t.Fatalf("relay round trip changed the request: %+v vs %+v", g, g2)
		}
	})
}

func FuzzDecodeOpenAI(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hello","max_tokens":5,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":[1,2,3],"stop":["a","b"],"seed":-1}`,
		`{"prompt":[[1,2]],"n":1,"top_p":0.5,"top_k":3,"min_p":0.1}`,
		`{"prompt":["x"],"stop":"\n","repetition_penalty":1.1,"presence_penalty":-2,"frequency_penalty":2}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"t"}]}],"max_completion_tokens":9}`,
		`{"messages":[{"role":"developer","content":null}]}`, `{"messages":[],"n":2}`, `{"prompt":{}}`, `{"tools":[{}]}`,
		`{"prompt":"x"} {}`, `{"prompt":"x","max_tokens":-1}`, `{"prompt":"x","temperature":1e309}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, chat bool) {
		d, aerr := decodeOpenAI(data, chat)
		if aerr != nil {
			if d != nil || aerr.Status != 400 || aerr.Message == "" || aerr.Type == "" {
				t.Fatalf("bad error: %+v", aerr)
			}
			return
		}
		g := d.gen
		if g.MaxTokens < 0 || g.Sampling.Temperature < 0 || g.Sampling.TopK < 0 || len(g.Stop) > maxStops {
			t.Fatalf("invalid request accepted: %+v", g)
		}
		if chat && len(g.Messages) == 0 {
			t.Fatal("chat request without messages accepted")
		}
		if !chat && g.IDs == nil && g.Messages != nil {
			t.Fatal("completion request with messages")
		}
	})
}
