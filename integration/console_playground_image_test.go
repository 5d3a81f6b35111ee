package integration

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestPlaygroundImageInput: an image attached in the playground goes to
// the upstream with the message as an image_url part holding its data
// URL, is shown in the turn and kept across a reload; "show as code"
// names it instead of printing megabytes of base64; a file too big or
// not an image is refused in words before anything is sent.
func TestPlaygroundImageInput(t *testing.T) {
	fake := gatewaytest.NewFakeOpenAI(t, "sk-fake-upstream-0001")
	cfg := accountConfig("off", 1000, 1000).
		channel("fake", "openai", "{{UP}}", "sk-fake-upstream-0001", "gpt-4o-mini").
		price("gpt-4o-mini", "input 0.15", "output 0.60")
	g := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"UP": fake.URL})
	createUser(g, "ivy", 5_000_000, "user")

	dir := t.TempDir()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range 8 {
		img.Set(i, i, color.RGBA{200, 30, 30, 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "dot.png")
	big := filepath.Join(dir, "big.png")
	text := filepath.Join(dir, "notes.txt")
	for name, data := range map[string][]byte{small: buf.Bytes(), big: bytes.Repeat([]byte{0}, 5<<20), text: []byte("not an image")} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wantURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())

	b := startBrowser(t, g)
	b.logInAs("ivy")
	b.open("/console/playground", `!document.getElementById('playground').hidden && document.querySelector('#model option[value="gpt-4o-mini"]') !== null`)
	b.do(chromedp.SetValue(chromedp.ID("model"), "gpt-4o-mini"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('model').dispatchEvent(new Event('change'))`))

	// refused before sending: a file that is no image, one too big
	b.do(chromedp.SetUploadFiles(chromedp.ID("image"), []string{text}))
	b.waitFor(`document.getElementById('chat-error').textContent !== ''`)
	if msg := b.text("chat-error"); !strings.Contains(msg, "PNG, JPEG, WebP or GIF") {
		t.Fatalf("a text file: %q", msg)
	}
	b.do(chromedp.SetUploadFiles(chromedp.ID("image"), []string{big}))
	b.waitFor(`document.getElementById('chat-error').textContent.includes('MB')`)
	if msg := b.text("chat-error"); !strings.Contains(msg, "5.0 MB") || !strings.Contains(msg, "at most 4 MB") {
		t.Fatalf("a 5 MB file: %q", msg)
	}
	if !evalJS[bool](b, `document.getElementById('attached').hidden`) {
		t.Fatal("a refused file is shown as attached")
	}

	b.do(chromedp.SetUploadFiles(chromedp.ID("image"), []string{small}))
	b.waitFor(`!document.getElementById('attached').hidden`)
	b.do(chromedp.Click(chromedp.ID("show-code")))
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('prompt').value = 'What is drawn here?'; document.getElementById('prompt').dispatchEvent(new Event('input'))`))
	if code := b.text("code-curl-text"); !strings.Contains(code, `"url": "data:image/png;base64,<the image, base64>"`) || strings.Contains(code, wantURL) {
		t.Fatalf("the code shows the image as %q", code)
	}
	b.screenshot("playground-image-attached")
	b.sendPrompt("What is drawn here?")
	if msg := b.text("chat-error"); msg != "" {
		t.Fatalf("playground error: %s", msg)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	msgs, _ := reqs[0].Body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	parts, _ := last["content"].([]any)
	if len(parts) != 2 {
		t.Fatalf("the user's message upstream: %v", last)
	}
	textPart, _ := parts[0].(map[string]any)
	imagePart, _ := parts[1].(map[string]any)
	imageURL, _ := imagePart["image_url"].(map[string]any)
	if textPart["text"] != "What is drawn here?" || imagePart["type"] != "image_url" || imageURL["url"] != wantURL {
		t.Fatalf("the parts upstream: %v", parts)
	}
	if !evalJS[bool](b, `document.querySelector('.msg.user img.attached')?.src.startsWith('data:image/png;base64,') === true && document.getElementById('attached').hidden`) {
		t.Fatal("the turn does not show its image, or the next message still has it")
	}

	// kept across a reload, and sent again with the conversation
	b.open("/console/playground", `!document.getElementById('playground').hidden && document.querySelectorAll('#chat .msg').length === 2`)
	if !evalJS[bool](b, `!!document.querySelector('.msg.user img.attached')`) {
		t.Fatal("the image is gone after a reload")
	}
	b.sendPrompt("And its colour?")
	reqs = fake.Requests()
	msgs, _ = reqs[len(reqs)-1].Body["messages"].([]any)
	first, _ := msgs[0].(map[string]any)
	if parts, _ := first["content"].([]any); len(parts) != 2 {
		t.Fatalf("the first turn sent again without its image: %v", first)
	}
	b.phone()
	b.noSideScroll("the playground with an image")
	b.screenshot("playground-image-phone")
	b.desktop()
}
