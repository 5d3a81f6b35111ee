package gatewaytest

import (
	"context"
	"testing"

	"google.golang.org/genai"
)

// The fake's batch mode is what the official SDK speaks: a batch created,
// followed and cancelled with genai's Batches, its answers read back.
func TestFakeGeminiBatchWithSDK(t *testing.T) {
	f := NewFakeBatchVendor(t, "sk-gem-batch")
	ctx := context.Background()
	c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "sk-gem-batch", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: f.URL}})
	if err != nil {
		t.Fatal(err)
	}
	src := &genai.BatchJobSource{InlinedRequests: []*genai.InlinedRequest{
		{Contents: genai.Text("hi"), Metadata: map[string]string{"key": "a"}},
		{Contents: genai.Text("yo"), Metadata: map[string]string{"key": "b"}},
	}}
	f.Hold(true)
	job, err := c.Batches.Create(ctx, "gemini-2.5-flash", src, &genai.CreateBatchJobConfig{DisplayName: "sdk"})
	if err != nil {
		t.Fatal(err)
	}
	if job.Name == "" || job.State != genai.JobStatePending {
		t.Fatalf("created %+v", job)
	}
	if got, err := c.Batches.Get(ctx, job.Name, nil); err != nil || got.State != genai.JobStateRunning {
		t.Fatalf("held: %v %+v", err, got)
	}
	f.Hold(false)
	got, err := c.Batches.Get(ctx, job.Name, nil)
	if err != nil || got.State != genai.JobStateSucceeded || got.Dest == nil || len(got.Dest.InlinedResponses) != 2 {
		t.Fatalf("done: %v %+v", err, got)
	}
	r := got.Dest.InlinedResponses[1]
	p, cpl := BatchUsage(1)
	if r.Metadata["key"] != "b" || r.Response == nil || r.Response.Text() != "ok" || r.Response.UsageMetadata == nil ||
		int64(r.Response.UsageMetadata.PromptTokenCount) != p || int64(r.Response.UsageMetadata.CandidatesTokenCount) != cpl {
		t.Fatalf("answer %+v", r)
	}

	// a cancel ends it with half its requests answered
	f.Hold(true)
	job, err = c.Batches.Create(ctx, "gemini-2.5-flash", src, &genai.CreateBatchJobConfig{DisplayName: "sdk"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Batches.Cancel(ctx, job.Name, nil); err != nil {
		t.Fatal(err)
	}
	got, err = c.Batches.Get(ctx, job.Name, nil)
	if err != nil || got.State != genai.JobStateCancelled || got.Dest == nil || len(got.Dest.InlinedResponses) != 1 {
		t.Fatalf("cancelled: %v %+v", err, got)
	}
	// no display name: refused as the API refuses it
	if _, err := c.Batches.Create(ctx, "gemini-2.5-flash", src, nil); err == nil {
		t.Fatal("a batch without a display name was created")
	}
}
