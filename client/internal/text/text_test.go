package text

import "testing"

func TestPyReprQuotesLikePython(t *testing.T) {
	cases := map[string]string{"x": "'x'", "it's": `"it's"`, `a'"b`: `'a\'"b'`, "": "''",
		"a\r\nb\\": `'a\r\nb\\'`, "\x00\x7f\u0085": `'\x00\x7f\x85'`, "é": "'é'", "\xff": `'\udcff'`,
		"\u200b": `'\u200b'`}
	for in, want := range cases {
		if got := PyRepr(in); got != want {
			t.Errorf("PyRepr(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFormatSecondsIsPythonsG(t *testing.T) {
	cases := map[float64]string{600: "600", 0.5: "0.5", 1234567: "1.23457e+06", 2.25: "2.25"}
	for in, want := range cases {
		if got := FormatSeconds(in); got != want {
			t.Errorf("FormatSeconds(%v) = %s, want %s", in, got, want)
		}
	}
}

func TestFirstRunesCountsCharactersNotBytes(t *testing.T) {
	if got := FirstRunes("éàü", 2); got != "éà" {
		t.Errorf("FirstRunes = %q", got)
	}
	if got := DecodeReplace([]byte("a\xffb")); got != "a\ufffdb" {
		t.Errorf("DecodeReplace = %q", got)
	}
}
