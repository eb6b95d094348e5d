package jsonerr

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestDescribe(t *testing.T) {
	var v struct {
		Arch struct {
			Hidden int   `json:"hidden"`
			Dims   []int `json:"dims"`
		} `json:"arch"`
		Name string `json:"name"`
	}
	for _, c := range []struct{ in, want string }{
		{`{"arch":{"hidden":"64"}}`, `field "arch.hidden" holds a JSON string, want an integer`},
		{`{"arch":{"dims":{}}}`, `field "arch.dims" holds a JSON object, want an array`},
		{`{"name":1.5}`, `field "name" holds a JSON number, want a string`},
		{`[1]`, `the document holds a JSON array, want an object`},
		{`{"arch":`, `invalid JSON at byte 8: unexpected end of JSON input`},
	} {
		err := json.Unmarshal([]byte(c.in), &v)
		if got := Describe(err); got != c.want {
			t.Errorf("%s: %q, want %q", c.in, got, c.want)
		}
	}
	if Error(nil) != nil || Describe(errors.New("json: x")) != "x" {
		t.Error("passthrough")
	}
}
