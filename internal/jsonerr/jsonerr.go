// Package jsonerr words encoding/json errors for the users of a file: which
// field holds what kind of value and what was expected, never the Go types
// behind them (encoding/json says "cannot unmarshal string into Go struct
// field Metadata.arch.hidden of type int").
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Describe returns err, a JSON decoding error, as a sentence about the
// document. Errors that are not decoding errors are returned as they read,
// less a leading "json: ".
func Describe(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		where := "the document"
		if te.Field != "" {
			where = fmt.Sprintf("field %q", te.Field)
		}
		return fmt.Sprintf("%s holds a JSON %s, want %s", where, te.Value, kind(te.Type))
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// Error is Describe as an error.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(Describe(err))
}

func kind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return kind(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another value"
}
