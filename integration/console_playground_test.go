package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The playground beyond one answer: what was typed kept as typed, tables,
// the cost of each reply, a failed send taken back, the conversation kept
// across a reload, the request as code, and its key disabled.

// sendPrompt puts text in the box as typed (line breaks included) and
// sends it, then waits until the playground is ready again.
func (b *browserSession) sendPrompt(text string) {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById('prompt').value = %q`, text)),
		chromedp.Click(chromedp.ID("send")))
	b.waitFor(`document.getElementById('stop').disabled && !document.querySelector('.msg.assistant .body[aria-busy]')`)
}

func TestPlaygroundConversation(t *testing.T) {
	g := gatewaytest.Start(t, playgroundConfig().String(), nil)
	createUser(g, "pia", 5_000_000, "user")
	b := startBrowser(t, g)
	b.logInAs("pia")
	b.open("/console/playground", `!document.getElementById('playground').hidden && document.getElementById('model').value === 'demo'`)
	if p := b.text("model-price"); !strings.Contains(p, "$1.00 per 1M input tokens") {
		t.Fatalf("the model's price is shown as %q", p)
	}

	// line breaks as typed, and a Markdown table in the (echoed) answer
	prompt := "Two lines:\nthe second\n\n| name | cost |\n|---|--:|\n| a | $1 |\n| b | $2 |"
	b.sendPrompt(prompt)
	if msg := b.text("chat-error"); msg != "" {
		t.Fatalf("playground error: %s", msg)
	}
	if got := evalJS[string](b, `document.querySelector('.msg.user .body').innerText`); got != prompt {
		t.Fatalf("the user's turn is shown as %q, want %q", got, prompt)
	}
	cells := evalJS[[]string](b, `[...document.querySelectorAll('.msg.assistant table th, .msg.assistant table td')].map((c) => c.textContent)`)
	if strings.Join(cells, ",") != "name,cost,a,$1,b,$2" {
		t.Fatalf("the answer's table cells: %v (%s)", cells, evalJS[string](b, `document.querySelector('.msg.assistant .body').innerHTML`))
	}
	if !evalJS[bool](b, `document.querySelector('.msg.assistant .body').innerHTML.includes('Two lines:<br>the second')`) {
		t.Fatalf("the answer's line break is lost: %s", evalJS[string](b, `document.querySelector('.msg.assistant .body').innerHTML`))
	}

	// the reply's cost, as the gateway billed it
	rows := g.WaitUsage("pia", 1)
	cost := b.text("chat")
	if want := fmt.Sprintf("%d tokens in, %d out · %s", rows[0].PromptTokens, rows[0].CompletionTokens, dollarsText(rows[0].Cost)); !strings.Contains(cost, want) {
		t.Fatalf("the reply's cost line is not %q: %q", want, evalJS[string](b, `document.querySelector('.msg.assistant .cost')?.textContent || ''`))
	}

	// a failed send (gpt-4o-mini's upstream is not there): no empty
	// answer, no second copy of the question, the text back in the box
	b.do(chromedp.SetValue(chromedp.ID("model"), "gpt-4o-mini"))
	b.sendPrompt("this will fail")
	if msg := b.text("chat-error"); msg == "" {
		t.Fatal("a failed send shows no error")
	}
	if n := evalJS[int](b, `document.querySelectorAll('#chat .msg').length`); n != 2 {
		t.Fatalf("%d turns after a failed send, want the 2 from before", n)
	}
	if v := evalJS[string](b, `document.getElementById('prompt').value`); v != "this will fail" {
		t.Fatalf("the box holds %q after a failed send", v)
	}
	b.do(chromedp.SetValue(chromedp.ID("model"), "demo"))
	b.sendPrompt("and now it works")
	roles := evalJS[[]string](b, `[...document.querySelectorAll('#chat .msg')].map((m) => m.classList[1])`)
	if strings.Join(roles, ",") != "user,assistant,user,assistant" {
		t.Fatalf("turns after retrying: %v", roles)
	}
	// the history sent with the retry had no failed turn in it
	if got := evalJS[string](b, `document.querySelectorAll('.msg.assistant .body')[1].textContent`); strings.TrimSpace(got) != "and now it works" {
		t.Fatalf("the retried answer is %q", got)
	}

	// show as code: the conversation, the base URL, no key
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('system').value = 'Be brief.'; document.getElementById('system').dispatchEvent(new Event('change'))`),
		chromedp.Click(chromedp.ID("show-code")))
	b.waitFor(`!document.getElementById('code-card').hidden`)
	curl := b.text("code-curl-text")
	if !strings.HasPrefix(curl, "curl "+g.URL+"/v1/chat/completions") || !strings.Contains(curl, `Bearer $GATEWAY_API_KEY`) {
		t.Fatalf("curl: %s", curl)
	}
	start, end := strings.Index(curl, "-d '")+4, strings.LastIndex(curl, "'")
	var sent struct {
		Model    string
		Messages []struct{ Role, Content string }
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(curl[start:end], `'\''`, "'")), &sent); err != nil {
		t.Fatalf("the curl body is not JSON: %v\n%s", err, curl)
	}
	if sent.Model != "demo" || len(sent.Messages) != 5 || sent.Messages[0].Content != "Be brief." || sent.Messages[1].Content != prompt || sent.Messages[4].Content != "and now it works" {
		t.Fatalf("the curl request: %+v", sent)
	}
	py, js := b.text("code-python-text"), b.text("code-js-text")
	for _, want := range []string{`base_url="` + g.URL + `/v1"`, `api_key=os.environ["GATEWAY_API_KEY"]`, `"content": "Be brief."`, "temperature=0.7"} {
		if !strings.Contains(py, want) {
			t.Fatalf("Python lacks %s:\n%s", want, py)
		}
	}
	if !strings.Contains(js, `baseURL: "`+g.URL+`/v1"`) || !strings.Contains(js, "process.env.GATEWAY_API_KEY") {
		t.Fatalf("JavaScript:\n%s", js)
	}
	if strings.Contains(curl+py+js, "sk-") {
		t.Fatal("the code shows a key")
	}
	b.do(chromedp.Click(chromedp.ID("tab-python")), chromedp.Click(chromedp.ID("copy-code")))
	b.waitFor(`document.getElementById('copy-code-feedback').textContent === 'Copied.'`)
	if clip := evalJS[string](b, `navigator.clipboard.readText()`); clip != py {
		t.Fatal("copy did not copy the Python shown")
	}
	b.screenshot("playground-code-desktop")

	// kept across a reload, costs included; a new conversation empties it
	b.open("/console/playground", `!document.getElementById('playground').hidden && document.querySelectorAll('#chat .msg').length === 4`)
	if v := evalJS[string](b, `document.getElementById('system').value`); v != "Be brief." {
		t.Fatalf("the system prompt after a reload: %q", v)
	}
	if n := evalJS[int](b, `document.querySelectorAll('#chat .msg .cost').length`); n != 2 {
		t.Fatalf("%d cost lines after a reload", n)
	}
	b.do(chromedp.Click(chromedp.ID("clear")))
	b.open("/console/playground", `!document.getElementById('playground').hidden`)
	if n := evalJS[int](b, `document.querySelectorAll('#chat .msg').length`); n != 0 {
		t.Fatalf("%d turns after a new conversation and a reload", n)
	}

	// the playground's key disabled: the message says which key and where
	pia := newClient(t, g)
	pia.login("pia")
	var list struct{ Data []apiToken }
	pia.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
	var pgID int64
	for _, tk := range list.Data {
		if tk.Name == "playground" {
			pgID = tk.ID
		}
	}
	pia.ok(http.MethodPatch, fmt.Sprintf("/api/user/tokens/%d", pgID), map[string]string{"status": "disabled"})
	b.sendPrompt("while disabled")
	if msg := b.text("chat-error"); !strings.Contains(msg, `key named "playground", which is disabled`) || !strings.Contains(msg, "enable it under API keys") {
		t.Fatalf("with its key disabled the playground says %q", msg)
	}
	if n := evalJS[int](b, `document.querySelectorAll('#chat .msg').length`); n != 0 {
		t.Fatalf("%d turns left after a refused send", n)
	}
	pia.ok(http.MethodPatch, fmt.Sprintf("/api/user/tokens/%d", pgID), map[string]string{"status": "enabled"})
	b.sendPrompt("while disabled")
	if msg := b.text("chat-error"); msg != "" {
		t.Fatalf("after enabling the key: %s", msg)
	}
}
