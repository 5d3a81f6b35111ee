package tasks

import (
	"strings"
	"testing"
)

func TestParseTaskSubmissionForms(t *testing.T) {
	a, e := ParseSubmission([]byte(`{"model":"m","prompt":"p","duration":6,"seed":-3,"image":"https://x/y.png",
		"aspect_ratio":"16:9","size":"720p","negative_prompt":"n","metadata":{"callback_url":"https://h.example/cb","mode":"pro","n":{"x":[1,2]}}}`))
	if e != nil {
		t.Fatal(e)
	}
	b, e := ParseSubmission([]byte(`{"model":"m","input":{"prompt":"p","duration":6,"seed":-3,"image":"https://x/y.png",
		"aspect_ratio":"16:9","size":"720p","negative_prompt":"n","metadata":{"callback_url":"https://h.example/cb","mode":"pro","n":{"x":[1,2]}}}}`))
	if e != nil {
		t.Fatal(e)
	}
	for _, s := range []*Submission{a, b} {
		r := s.Req
		if r.Model != "m" || r.Prompt != "p" || r.Duration != 6 || r.Seed == nil || *r.Seed != -3 || r.Image != "https://x/y.png" ||
			r.AspectRatio != "16:9" || r.Size != "720p" || r.NegativePrompt != "n" || r.CallbackURL != "https://h.example/cb" ||
			string(r.Metadata) != `{"mode":"pro","n":{"x":[1,2]}}` || strings.Join(s.MetaKeys, ",") != "mode,n" {
			t.Fatalf("form %s decoded to %+v (metadata %s)", s.Form, r, r.Metadata)
		}
	}
	if a.Form != "A" || b.Form != "B" {
		t.Fatalf("forms %s %s", a.Form, b.Form)
	}
	// no metadata and null fields decode to nothing
	c, e := ParseSubmission([]byte(`{"model":"m","prompt":"p","seed":null,"metadata":null}`))
	if e != nil || c.Req.Seed != nil || c.Req.Metadata != nil || c.Req.CallbackURL != "" {
		t.Fatalf("nulls: %+v %v", c, e)
	}
}

func TestSubmissionPrefix(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"m","prompt":"p"}`:           "",
		`{"model":"m","input":{"prompt":"p"}}`: "input.",
	} {
		s, e := ParseSubmission([]byte(body))
		if e != nil || s.Prefix() != want {
			t.Errorf("%s: prefix %q, %v; want %q", body, s.Prefix(), e, want)
		}
	}
}
