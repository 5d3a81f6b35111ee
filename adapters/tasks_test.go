package adapters

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestTaskImageBytes(t *testing.T) {
	png := "iVBORw0KGgoAAAANSUhEUg=="
	tests := []struct {
		in, mediaType, err string
	}{
		{"data:image/webp;base64,UklGRg==", "image/webp", ""},
		{png, "image/png", ""},
		{"  " + png + "\n", "image/png", ""},
		{"data:image/png," + png, "", "data:image/png;base64,"},
		{"data:image/png;base64,***", "", "does not decode"},
		{"aGVsbG8=", "", "not a PNG, JPEG, GIF or WebP"},
		{"not base64 at all!", "", "http(s) URL, a data: URL or base64"},
		{"http://127.0.0.1/x.png", "", "image"}, // fetched within the gateway's bounds: refused
	}
	for _, tt := range tests {
		img, err := TaskImageBytes(context.Background(), tt.in)
		switch {
		case tt.err == "" && (err != nil || img.MediaType != tt.mediaType || len(img.Data) == 0):
			t.Errorf("%.30q: %+v %v", tt.in, img, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%.30q: err %v, want %q", tt.in, err, tt.err)
		}
		if e, ok := err.(*Error); err != nil && (!ok || e.Status != 400) {
			t.Errorf("%.30q: %T %v is not a 400", tt.in, err, err)
		}
	}
}

func TestMergeTaskMetadata(t *testing.T) {
	body := []byte(`{"model":"m","duration":5,"nested":{"a":1}}`)
	got, err := MergeTaskMetadata(body, json.RawMessage(`{"mode":"pro","duration":10,"camera":{"type":"pan","speed":0.5}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","duration":10,"nested":{"a":1},"camera":{"type":"pan","speed":0.5},"mode":"pro"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for _, none := range []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(`{}`)} {
		if got, err := MergeTaskMetadata(body, none); err != nil || string(got) != string(body) {
			t.Fatalf("%s: %s %v", none, got, err)
		}
	}
	if _, err := MergeTaskMetadata(body, json.RawMessage(`[1]`)); err == nil {
		t.Fatal("an array was merged")
	}
}
