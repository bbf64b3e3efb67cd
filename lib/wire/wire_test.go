package wire

import (
	"strings"
	"testing"
)

func TestMarshalCanonical(t *testing.T) {
	type inner struct {
		Zeta  int    `json:"zeta"`
		Alpha string `json:"alpha"`
	}
	v := struct {
		B     []inner        `json:"b"`
		A     string         `json:"a"`
		M     map[string]int `json:"m"`
		Empty []string       `json:"empty"`
	}{B: []inner{{1, "<&>"}}, A: "é", M: map[string]int{"y": 2, "x": 1}, Empty: []string{}}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"é","b":[{"alpha":"<&>","zeta":1}],"empty":[],"m":{"x":1,"y":2}}`
	if string(got) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", got, want)
	}
	h1, _ := Hash(v)
	h2 := MustHash(v)
	if h1 != h2 || len(h1) != 64 {
		t.Errorf("hash %q vs %q", h1, h2)
	}
}

func TestLargeIntegersSurvive(t *testing.T) {
	got, err := Marshal(struct {
		N int64 `json:"n"`
	}{1<<62 + 1})
	if err != nil || string(got) != `{"n":4611686018427387905}` {
		t.Errorf("Marshal = %s, %v", got, err)
	}
}

func TestDecodeStrict(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	if err := DecodeStrict([]byte(`{"a":1}`+"\n"), &v); err != nil || v.A != 1 {
		t.Fatalf("valid document: %v", err)
	}
	for _, bad := range []string{`{"a":1,"b":2}`, `{"a":1} {"a":2}`, `{"a":1}x`, ``, `{"a":"1"}`} {
		if err := DecodeStrict([]byte(bad), &v); err == nil {
			t.Errorf("DecodeStrict(%q) accepted", bad)
		}
	}
}

func TestSchemaOf(t *testing.T) {
	cases := map[string]string{
		`{"schema":"barn.spec/v1","x":1}`: "barn.spec/v1",
		`{"schema":1}`:                    "",
		`[1,2]`:                           "",
		`not json`:                        "",
	}
	for in, want := range cases {
		if got := SchemaOf([]byte(in)); got != want {
			t.Errorf("SchemaOf(%s) = %q, want %q", in, got, want)
		}
	}
	b, _ := MarshalIndent(map[string]int{"b": 1, "a": 2})
	if !strings.HasPrefix(string(b), "{\n  \"a\": 2") {
		t.Errorf("MarshalIndent = %s", b)
	}
}
