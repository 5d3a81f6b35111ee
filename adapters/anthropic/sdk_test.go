package anthropic_test

import (
	"encoding/json"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// What anthropic-sdk-go sends back of an answer it received (Message.ToParam:
// thinking with its signature, text with citations, tool_use) decodes, and
// the signature stays Anthropic's.
func TestSDKRoundTrip(t *testing.T) {
	for _, in := range []string{"testdata/response/tools.anthropic.json", "testdata/response/text.anthropic.json"} {
		var msg sdk.Message
		if err := json.Unmarshal(read(t, in), &msg); err != nil {
			t.Fatal(err)
		}
		params := sdk.MessageNewParams{
			Model:     "claude-sonnet-4-5",
			MaxTokens: 100,
			Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("q")), msg.ToParam()},
		}
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				params.Messages = append(params.Messages, sdk.NewUserMessage(sdk.NewToolResultBlock(b.ID, "18C", false)))
				break
			}
		}
		body, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		req, err := ant.DecodeRequest(adapters.OpChat, body, post("/v1/messages", "anthropic-version", "2023-06-01"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", in, err, body)
		}
		got := req.Chat.Messages[1].Parts
		if len(got) != len(msg.Content) {
			t.Fatalf("%s: %d parts from %d blocks", in, len(got), len(msg.Content))
		}
		if got[0].Type == adapters.PartThinking && got[0].Signature != "anthropic:"+msg.Content[0].Signature {
			t.Errorf("%s: signature %q", in, got[0].Signature)
		}
	}
}
