package store

import (
	"slices"
	"testing"
)

func TestUsageWhereNumbersEachValueOnce(t *testing.T) {
	for _, mark := range []string{"?", "$"} {
		w := NewWhere(mark)
		if err := UsageWhere(UsageFilter{UserID: 4, RequestID: "req-1", Status: "502"}, "", w); err != nil {
			t.Fatal(err)
		}
		want := " WHERE user_id = " + mark + "1 AND (request_id = " + mark + "2 OR upstream_request_id = " + mark +
			"2) AND status = " + mark + "3 AND (status < 200 OR status >= 300)"
		if got := w.String(); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		if got := w.Args(); !slices.Equal(got, []any{int64(4), "req-1", 502}) {
			t.Errorf("args %v", got)
		}
	}
	if err := UsageWhere(UsageFilter{Status: "bad"}, "", NewWhere("?")); err == nil {
		t.Error("a status that is neither ok, error nor a number was taken")
	}
	if got := NewWhere("?").String(); got != "" {
		t.Errorf("no conditions: %q", got)
	}
}

func TestLikePart(t *testing.T) {
	if got, want := LikePart(`50%_a\b`), `%50\%\_a\\b%`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
