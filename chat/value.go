package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// toValue converts Go data to an engine value. Maps get sorted keys; JSON
// (json.RawMessage, or structs through encoding/json) keeps its key order.
func toValue(x any) (jinja.Value, error) {
	switch v := x.(type) {
	case nil:
		return jinja.None(), nil
	case jinja.Value:
		return v, nil
	case json.RawMessage:
		return parseOrderedJSON(v)
	case bool:
		return jinja.NewBool(v), nil
	case string:
		return jinja.NewString(v), nil
	case int:
		return jinja.NewInt(int64(v)), nil
	case int64:
		return jinja.NewInt(v), nil
	case int32:
		return jinja.NewInt(int64(v)), nil
	case float64:
		return jinja.NewFloat(v), nil
	case float32:
		return jinja.NewFloat(float64(v)), nil
	case []any:
		items := make([]jinja.Value, len(v))
		for i, e := range v {
			var err error
			if items[i], err = toValue(e); err != nil {
				return jinja.Undefined(), err
			}
		}
		return jinja.NewList(items), nil
	case []string:
		items := make([]jinja.Value, len(v))
		for i, e := range v {
			items[i] = jinja.NewString(e)
		}
		return jinja.NewList(items), nil
	case map[string]any:
		d := jinja.NewDict()
		for _, k := range slices.Sorted(maps.Keys(v)) {
			e, err := toValue(v[k])
			if err != nil {
				return jinja.Undefined(), err
			}
			d.AsDict().Set(k, e)
		}
		return d, nil
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return jinja.NewInt(rv.Convert(reflect.TypeFor[int64]()).Int()), nil
	case reflect.Slice, reflect.Array:
		items := make([]jinja.Value, rv.Len())
		for i := range items {
			var err error
			if items[i], err = toValue(rv.Index(i).Interface()); err != nil {
				return jinja.Undefined(), err
			}
		}
		return jinja.NewList(items), nil
	}
	raw, err := json.Marshal(x)
	if err != nil {
		return jinja.Undefined(), err
	}
	return parseOrderedJSON(raw)
}

// parseOrderedJSON parses JSON keeping object key order, as Python's json
// does (templates that print tools with tojson depend on it).
func parseOrderedJSON(raw []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("json: %w", err)
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > 10000 {
		return jinja.Undefined(), fmt.Errorf("nesting too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				key, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return d, nil
		}
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return jinja.NewInt(i), nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewFloat(f), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected token %v", tok)
}

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=sort_keys).
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: missing value")
	}
	e := jsonEncoder{itemSep: ", ", keySep: ": ", indent: -1}
	if v, ok := kwargs["indent"]; ok && v.IsInt() {
		e.indent = int(v.AsInt())
		e.itemSep = ","
	} else if ok && v.IsString() {
		e.indentStr, e.indent = v.AsString(), 0
		e.itemSep = ","
	}
	if len(args) > 1 && args[1].IsInt() { // tojson(4)
		e.indent = int(args[1].AsInt())
		e.itemSep = ","
	}
	if v, ok := kwargs["separators"]; ok && v.IsList() && v.AsList().Len() == 2 {
		if a, b := v.AsList().Get(0), v.AsList().Get(1); a.IsString() && b.IsString() {
			e.itemSep, e.keySep = a.AsString(), b.AsString()
		}
	}
	if v, ok := kwargs["sort_keys"]; ok {
		e.sortKeys = v.IsTruthy()
	}
	if v, ok := kwargs["ensure_ascii"]; ok {
		e.ascii = v.IsTruthy()
	}
	if e.indent >= 0 && e.indentStr == "" {
		e.indentStr = strings.Repeat(" ", e.indent)
	}
	var b strings.Builder
	if err := e.encode(&b, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

type jsonEncoder struct {
	itemSep, keySep string
	indent          int // < 0: single line
	indentStr       string
	sortKeys, ascii bool
}

func (e *jsonEncoder) newline(b *strings.Builder, level int) {
	if e.indent < 0 {
		return
	}
	b.WriteByte('\n')
	for range level {
		b.WriteString(e.indentStr)
	}
}

func (e *jsonEncoder) encode(b *strings.Builder, v jinja.Value, level int) error {
	if level > 10000 {
		return fmt.Errorf("tojson: nesting too deep")
	}
	switch {
	case v.IsNone(), v.IsUndefined():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		e.str(b, v.AsString())
	case v.IsList():
		l := v.AsList()
		if l.Len() == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := range l.Len() {
			if i > 0 {
				b.WriteString(e.itemSep)
			}
			e.newline(b, level+1)
			if err := e.encode(b, l.Get(i), level+1); err != nil {
				return err
			}
		}
		e.newline(b, level)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if e.sortKeys {
			keys = slices.Sorted(slices.Values(keys))
		}
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(e.itemSep)
			}
			e.newline(b, level+1)
			e.str(b, k)
			b.WriteString(e.keySep)
			x, _ := d.Get(k)
			if err := e.encode(b, x, level+1); err != nil {
				return err
			}
		}
		e.newline(b, level)
		b.WriteByte('}')
	default:
		b.WriteString("null")
	}
	return nil
}

func (e *jsonEncoder) str(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (e.ascii && r > 0x7e):
				if r > 0xFFFF {
					r -= 0x10000
					fmt.Fprintf(b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyFloat formats like Python's float repr.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	exp := int(math.Floor(math.Log10(math.Abs(f))))
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsRune(s, '.') {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	// Go writes e+16 / e-05 like Python; only a bare mantissa differs.
	return s
}

// strftime implements the Python strftime directives templates use.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case '-':
			// %-d, %-m: no padding (glibc).
			if i+1 < len(format) {
				i++
				switch format[i] {
				case 'd':
					b.WriteString(strconv.Itoa(t.Day()))
				case 'm':
					b.WriteString(strconv.Itoa(int(t.Month())))
				case 'H':
					b.WriteString(strconv.Itoa(t.Hour()))
				case 'I':
					b.WriteString(strconv.Itoa((t.Hour()+11)%12 + 1))
				default:
					b.WriteString("%-" + string(format[i]))
				}
			}
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'B':
			b.WriteString(t.Month().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
