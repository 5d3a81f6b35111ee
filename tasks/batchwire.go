package tasks

import (
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/store"
)

// The batch endpoints' answers, in the shapes of OpenAI's API reference
// (Batch, FileObject, cursor lists) and Anthropic's (MessageBatch, its
// page), which the official SDKs decode.

// OpenAIFile is a file as OpenAI's API shows it.
func OpenAIFile(f *store.File) map[string]any {
	m := map[string]any{"id": f.ID, "object": "file", "bytes": f.Bytes, "created_at": f.CreatedAt.Unix(),
		"filename": f.Filename, "purpose": f.Purpose, "status": "processed", "status_details": nil}
	if !f.ExpiresAt.IsZero() {
		m["expires_at"] = f.ExpiresAt.Unix()
	}
	return m
}

// OpenAIList is OpenAI's cursor page of items, whose ids are ids.
func OpenAIList(items []map[string]any, ids []string, hasMore bool) map[string]any {
	m := map[string]any{"object": "list", "data": items, "has_more": hasMore, "first_id": nil, "last_id": nil}
	if len(ids) > 0 {
		m["first_id"], m["last_id"] = ids[0], ids[len(ids)-1]
	}
	return m
}

func unixOrNil(sec int64) any {
	if sec == 0 {
		return nil
	}
	return sec
}

func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// OpenAIBatch is a batch as OpenAI's API shows it.
func OpenAIBatch(t *store.Task) map[string]any {
	st := readState(t)
	status := "in_progress"
	var completedAt, failedAt, cancelledAt, finalizingAt int64
	ended := !t.FinishedAt.IsZero()
	switch {
	case ended && t.Status == adapters.TaskFailed:
		status, failedAt = "failed", t.FinishedAt.Unix()
	case ended && st.CancelRequestedAt != 0 && st.Cancelled > 0:
		// a cancel that came after the vendor had run every line leaves it completed
		status, cancelledAt = "cancelled", t.FinishedAt.Unix()
	case ended:
		status, completedAt, finalizingAt = "completed", t.FinishedAt.Unix(), t.FinishedAt.Unix()
	case st.CancelRequestedAt != 0:
		status = "cancelling"
	case t.UpstreamID == "":
		status = "validating"
	}
	completed, failed := st.Completed, st.Failed
	if !ended {
		completed = st.Done
	}
	var errs any
	if t.Status == adapters.TaskFailed && t.Error != "" {
		errs = map[string]any{"object": "list", "data": []map[string]any{{"code": "batch_failed", "message": t.Error, "line": nil, "param": nil}}}
	}
	window := st.CompletionWindow
	if window == "" {
		window = "24h"
	}
	var metadata any
	if len(st.Metadata) > 0 {
		metadata = st.Metadata
	}
	return map[string]any{"id": t.ID, "object": "batch", "endpoint": st.Endpoint, "errors": errs,
		"input_file_id": st.InputFileID, "completion_window": window, "status": status,
		"output_file_id": strOrNil(st.OutputFileID), "error_file_id": strOrNil(st.ErrorFileID),
		"created_at": t.CreatedAt.Unix(), "in_progress_at": unixOrNil(st.InProgressAt),
		"expires_at": t.CreatedAt.Add(24 * time.Hour).Unix(), "finalizing_at": unixOrNil(finalizingAt),
		"completed_at": unixOrNil(completedAt), "failed_at": unixOrNil(failedAt), "expired_at": nil,
		"cancelling_at": unixOrNil(st.CancelRequestedAt), "cancelled_at": unixOrNil(cancelledAt),
		"request_counts": map[string]int64{"total": st.Lines, "completed": completed, "failed": failed},
		"metadata":       metadata, "model": t.Model,
		"usage": map[string]any{"input_tokens": st.InputTokens, "output_tokens": st.OutputTokens,
			"total_tokens": st.InputTokens + st.OutputTokens, "input_tokens_details": map[string]int64{"cached_tokens": 0},
			"output_tokens_details": map[string]int64{"reasoning_tokens": 0}}}
}

func rfc3339OrNil(sec int64) any {
	if sec == 0 {
		return nil
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}

// AnthropicBatch is a batch as Anthropic's API shows it; base is the
// gateway's address as the client called it, for results_url.
func AnthropicBatch(t *store.Task, base string) map[string]any {
	st := readState(t)
	ended := !t.FinishedAt.IsZero()
	status := "in_progress"
	counts := map[string]int64{"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
	var endedAt int64
	var results any
	switch {
	case ended:
		status, endedAt = "ended", t.FinishedAt.Unix()
		counts["succeeded"], counts["errored"], counts["canceled"] = st.Completed, st.Failed, st.Cancelled
		results = base + "/v1/messages/batches/" + t.ID + "/results"
	case st.CancelRequestedAt != 0:
		status = "canceling"
		counts["processing"] = st.Lines
	default:
		counts["processing"] = st.Lines
	}
	return map[string]any{"id": t.ID, "type": "message_batch", "processing_status": status,
		"request_counts": counts, "ended_at": rfc3339OrNil(endedAt),
		"created_at":          t.CreatedAt.UTC().Format(time.RFC3339),
		"expires_at":          t.CreatedAt.Add(24 * time.Hour).UTC().Format(time.RFC3339),
		"archived_at":         nil,
		"cancel_initiated_at": rfc3339OrNil(st.CancelRequestedAt),
		"results_url":         results}
}

// AnthropicList is Anthropic's page of items.
func AnthropicList(items []map[string]any, ids []string, hasMore bool) map[string]any {
	m := map[string]any{"data": items, "has_more": hasMore, "first_id": nil, "last_id": nil}
	if len(ids) > 0 {
		m["first_id"], m["last_id"] = ids[0], ids[len(ids)-1]
	}
	return m
}

// BatchResultsFile is the id of an ended batch's results (Anthropic) or
// output file (OpenAI), "" when there is none yet.
func BatchResultsFile(t *store.Task) string {
	if t.FinishedAt.IsZero() {
		return ""
	}
	return readState(t).OutputFileID
}
