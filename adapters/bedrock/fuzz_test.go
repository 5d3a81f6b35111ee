package bedrock_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// FuzzStreamDecoder feeds arbitrary bytes, seeded with the fixtures'
// streams, through the event-stream reader and the step as the host runs
// them: nothing panics, and no event is larger than the bound.
func FuzzStreamDecoder(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "stream", "*.bedrock.eventstream"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(eventStream(f, b))
	}
	a := load(f, `{}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dialect := range []string{"openai", "anthropic"} {
			dec := adapters.DecodeStream(a, &adapters.Request{Op: adapters.OpChat, Dialect: dialect, Stream: true}, bytes.NewReader(body))
			dec.SetMaxEvent(4 << 10)
			for i := 0; i < 10000; i++ {
				ev, err := dec.Next()
				if err != nil {
					break
				}
				if len(ev.Text) > 4<<10 {
					t.Fatalf("an event of %d bytes passed a 4 KiB bound", len(ev.Text))
				}
			}
			dec.Release()
		}
	})
}
