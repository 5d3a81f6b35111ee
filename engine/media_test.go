package engine

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// A transcription whose upstream does not say how long the audio was is
// charged its reservation, marked estimated.
func TestTranscriptionCostFallsBackToTheReservation(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpTranscription, Model: "whisper-1", Media: &adapters.MediaRequest{}}
	price := &billing.Price{AudioSecond: 100}
	reserved, e := MediaReservation(req, price, 0)
	if e != nil || reserved != price.AudioCost(1000) {
		t.Fatalf("reservation of an empty upload: %d, %v", reserved, e)
	}
	if cost, est := MediaCost(req, price, adapters.Usage{}, adapters.MediaUsage{}, reserved); cost != reserved || !est {
		t.Fatalf("unreported length: %d (estimated %v), want the reservation", cost, est)
	}
	mu := adapters.MediaUsage{AudioMillis: 3000, AudioKnown: true}
	if cost, est := MediaCost(req, price, adapters.Usage{}, mu, reserved); cost != price.AudioCost(3000) || est {
		t.Fatalf("reported length: %d (estimated %v)", cost, est)
	}
	if _, e := MediaReservation(req, &billing.Price{Input: 1}, 0); e != nil {
		t.Fatalf("a model billed by tokens: %v", e)
	}
	if _, e := MediaReservation(req, &billing.Price{}, 0); e == nil || e.Code != "model_price_missing" {
		t.Fatalf("no audio price: %v", e)
	}
}

// A stream cut short is billed at least what was relayed after the
// upstream's last report.
func TestBilledUsageOfACutStream(t *testing.T) {
	req := &adapters.Request{Model: "gpt-4o", Chat: &adapters.ChatRequest{}}
	reported := adapters.Usage{PromptTokens: 10, CompletionTokens: 1}
	u := BilledUsage(req, reported, "", "a few more words were relayed", true)
	if u.CompletionTokens <= 1 || u.PromptTokens < 10 || !u.Estimated {
		t.Fatalf("%+v", u)
	}
	if got := BilledUsage(req, reported, "", "ignored", false); got != reported {
		t.Fatalf("a whole stream is billed as reported: %+v", got)
	}
}
