package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

type strictDoc struct {
	Schema     string         `json:"schema"`
	Generation int64          `json:"generation"`
	Tags       map[string]int `json:"tags"`
	Inner      *strictInner   `json:"inner"`
	List       []strictItem   `json:"list"`
}

type strictInner struct {
	Name string `json:"name"`
}

type strictItem struct {
	A bool `json:"a"`
}

// TestDecodeStrictRefusesDuplicatesAndCaseVariants is the attack of issue
// 13 finding 7: encoding/json matches names case-insensitively and lets
// the last duplicate win, so {"generation":1,"GENERATION":7} decoded to 7.
func TestDecodeStrictRefusesDuplicatesAndCaseVariants(t *testing.T) {
	cases := map[string]string{
		`{"generation":1,"GENERATION":7}`:        `line 1, column 17: unknown field "GENERATION"`,
		`{"Generation":7}`:                       `unknown field "Generation"`,
		`{"generation":1,"generation":7}`:        `line 1, column 17: duplicate field "generation"`,
		`{"inner":{"name":"a","name":"b"}}`:      `duplicate field "name" in /inner`,
		`{"inner":{"NAME":"a"}}`:                 `unknown field "NAME" in /inner`,
		`{"tags":{"k":1,"k":2}}`:                 `duplicate field "k" in /tags`,
		`{"list":[{"a":true,"a":false}]}`:        `duplicate field "a" in /list/0`,
		`{"list":[{"A":true}]}`:                  `unknown field "A" in /list/0`,
		`{"schema":"x","extra":1}`:               `unknown field "extra"`,
		"{\"generation\":1}\n{\"generation\":2}": `line 2, column 1: trailing data after the JSON document`,
		`{"generation":1} x`:                     `trailing data`,
		"{\"schema\":\"\xff\"}":                  `invalid UTF-8`,
		``:                                       `EOF`,
		`{"generation":"1"}`:                     `/generation`,
	}
	for in, want := range cases {
		var d strictDoc
		err := DecodeStrict([]byte(in), &d)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeStrict(%q) = %v, want an error containing %q", in, err, want)
		}
		var de *DecodeError
		if err != nil && !errors.As(err, &de) {
			t.Errorf("DecodeStrict(%q): %T is not a *DecodeError", in, err)
		}
	}
	var d strictDoc
	in := `{"schema":"s","generation":7,"tags":{"k":1,"K":2},"inner":{"name":"n"},"list":[{"a":true}]}` + "\n"
	if err := DecodeStrict([]byte(in), &d); err != nil || d.Generation != 7 || d.Tags["K"] != 2 || d.Inner.Name != "n" || !d.List[0].A {
		t.Fatalf("valid document: %+v, %v", d, err)
	}
	if SchemaOf([]byte(`{"schema":"a","schema":"b"}`)) != "" || SchemaOf([]byte(`{"SCHEMA":"a"}`)) != "" {
		t.Error("SchemaOf accepts a duplicate or case-variant schema")
	}
}

// FuzzDecodeStrict checks DecodeStrict against an independent oracle built
// from encoding/json v1's tokenizer: it accepts exactly the inputs that are
// one valid-UTF-8 JSON value, with no repeated member name in any object,
// every struct member name spelled exactly, and types v1 also decodes; and
// what it accepts decodes to what v1 decodes.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"schema":"s","generation":7,"tags":{"k":1},"inner":{"name":"n"},"list":[{"a":true}]}`,
		`{"generation":1,"GENERATION":7}`, `{"tags":{"k":1,"k":2}}`, `{"inner":null,"list":null}`,
		`{"list":[{"a":true},{"a":false}]}`, `{"generation":1} {}`, `{"Schema":"x"}`, `[]`, `null`, `{"generation":1e2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got strictDoc
		err := DecodeStrict(data, &got)
		oracleOK := oracleAccepts(data)
		var want strictDoc
		v1err := json.Unmarshal(data, &want)
		if err == nil {
			if !oracleOK {
				t.Fatalf("DecodeStrict accepted %q, which repeats or misspells a name, or is not one JSON value", data)
			}
			if v1err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("DecodeStrict(%q) = %+v; encoding/json = %+v, %v", data, got, want, v1err)
			}
			return
		}
		// The converse, where the two decoders agree on the semantics:
		// escapes of invalid UTF-16 and numbers that are not plain
		// integers are left to the unit tests.
		if oracleOK && v1err == nil && utf8.Valid(data) && !bytes.Contains(data, []byte(`\u`)) && !bytes.ContainsAny(data, "eE.") {
			t.Fatalf("DecodeStrict refused %q (%v), which is strict JSON encoding/json decodes", data, err)
		}
	})
}

// oracleAccepts walks data with encoding/json v1's tokenizer and reports
// whether it is exactly one JSON value whose objects repeat no name and
// whose struct members (everything but the tags map) are spelled exactly.
func oracleAccepts(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	top := map[string]string{"schema": "", "generation": "", "tags": "map", "inner": "inner", "list": "list"}
	shapes := map[string]map[string]string{"inner": {"name": ""}, "item": {"a": ""}}
	var walk func(allowed map[string]string, anyKey bool) bool
	walk = func(allowed map[string]string, anyKey bool) bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				name := k.(string)
				kind, ok := allowed[name]
				if seen[name] || (!ok && !anyKey) {
					return false
				}
				seen[name] = true
				var next map[string]string
				switch kind {
				case "inner":
					next = shapes["inner"]
				case "list":
					next = map[string]string{"": "item"}
				case "item":
					next = shapes["item"]
				}
				if !walk(next, kind == "map") {
					return false
				}
			}
			_, err := dec.Token()
			return err == nil
		case json.Delim('['):
			elem := allowed
			if k, ok := allowed[""]; ok && k == "item" {
				elem = shapes["item"]
			}
			for dec.More() {
				if !walk(elem, false) {
					return false
				}
			}
			_, err := dec.Token()
			return err == nil
		}
		return true
	}
	if !walk(top, false) {
		return false
	}
	_, err := dec.Token()
	return err == io.EOF
}
