package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// responsesStep reads an upstream's Responses API event stream, which a
// Responses client gets unchanged: named events, ending with
// response.completed, response.incomplete or response.failed, which carry
// the whole response and its usage.
type responsesStep struct{}

func responsesEventName(ev *adapters.SSEEvent) string {
	if ev.Name != "" {
		return ev.Name
	}
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(ev.Data, &t)
	return t.Type
}

// Probe implements adapters.StreamStep.
func (responsesStep) Probe(ev *adapters.SSEEvent) (*adapters.Usage, adapters.StreamEnd, error) {
	switch responsesEventName(ev) {
	case "response.completed", "response.incomplete", "response.failed":
		var u responsesUsageOnly
		if json.Unmarshal(ev.Data, &u) != nil || u.Response == nil || u.Response.Usage == nil {
			return nil, adapters.StreamEnds, nil
		}
		usage := responsesUsageFromWire(u.Response.Usage)
		return &usage, adapters.StreamEnds, nil
	case "error":
		// relayed as it came; response.failed follows and ends the stream
		return nil, adapters.StreamGoesOn, nil
	}
	return nil, adapters.StreamGoesOn, nil
}

// DeltaText implements adapters.StreamStep.
func (responsesStep) DeltaText(data []byte) string {
	var d struct {
		Type  string `json:"type"`
		Delta string `json:"delta"`
	}
	if json.Unmarshal(data, &d) != nil || !strings.HasSuffix(d.Type, ".delta") {
		return ""
	}
	return d.Delta
}

// Translate implements adapters.StreamStep. Only Responses clients are sent
// to a channel's Responses endpoint, and they get its stream unchanged.
func (responsesStep) Translate(out []*adapters.StreamEvent, _ *adapters.SSEEvent) ([]*adapters.StreamEvent, adapters.StreamEnd, error) {
	return out, adapters.StreamGoesOn, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "a Responses API stream cannot be translated for a client of another API")
}

// decodeResponsesBody reads the usage of a Responses API answer, and its
// text when it reports none, so the relay can count it.
func decodeResponsesBody(body []byte) (*adapters.Response, error) {
	var w struct {
		Usage  *responsesUsage `json:"usage"`
		Output []struct {
			Type      string          `json:"type"`
			Content   []responsesPart `json:"content"`
			Arguments string          `json:"arguments"`
			Summary   []responsesSummaryText
		} `json:"output"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	resp := &adapters.Response{Raw: body, Dialect: Name, ContentType: "application/json", Usage: responsesUsageFromWire(w.Usage)}
	resp.Message.Role = adapters.RoleAssistant
	if w.Usage == nil {
		var text strings.Builder
		for _, o := range w.Output {
			for _, c := range o.Content {
				text.WriteString(c.Text)
			}
			for _, s := range o.Summary {
				text.WriteString(s.Text)
			}
			text.WriteString(o.Arguments)
		}
		resp.Message.Parts = []adapters.Part{{Type: adapters.PartText, Text: text.String()}}
	}
	return resp, nil
}

var _ adapters.StreamStep = responsesStep{}
