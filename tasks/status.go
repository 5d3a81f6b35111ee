package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/store"
)

// Own loads a user's task, or the 404 to answer (log names the caller).
func (e *Engine) Own(ctx context.Context, log *zap.Logger, userID int64, taskID string) (*store.Task, *adapters.Error) {
	if !strings.HasPrefix(taskID, "task_") || len(taskID) > 64 || strings.Contains(taskID, "/") {
		return nil, NotFound()
	}
	t, err := e.deps.Store.TaskByID(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.UserID != userID) {
		return nil, NotFound()
	}
	if err != nil {
		log.Error("reading a task", zap.Error(err))
		return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot read tasks right now; try again shortly")
	}
	return t, nil
}

// Status is a user's task as it stands, first refreshed from the upstream
// when it is unfinished and was last asked about longer than a poll
// interval ago (a client told by a callback need not wait for the poller).
func (e *Engine) Status(ctx context.Context, log *zap.Logger, userID int64, taskID string) (*store.Task, *adapters.Error) {
	t, ae := e.Own(ctx, log, userID, taskID)
	if ae != nil {
		return nil, ae
	}
	if t.FinishedAt.IsZero() && t.UpstreamID != "" && time.Since(t.UpdatedAt) >= e.cfg.PollInterval {
		if fresh := e.refresh(ctx, t.ID); fresh != nil {
			t = fresh
		}
	}
	return t, nil
}

// ClientFiles are the files a client is shown: the vendor's URLs, or the
// gateway's own under base (scheme://host) where downloading needs the
// channel's key.
func (e *Engine) ClientFiles(t *store.Task, base string) []adapters.TaskFile {
	files := taskFiles(t)
	if len(files) == 0 {
		return []adapters.TaskFile{}
	}
	if !e.fetchesFiles(t.Channel) {
		return files
	}
	out := make([]adapters.TaskFile, len(files))
	for i, f := range files {
		out[i] = adapters.TaskFile{URL: fmt.Sprintf("%s%s%s/%d", base, FilePrefix, t.ID, i), Type: f.Type}
	}
	return out
}

func (e *Engine) fetchesFiles(channel string) bool {
	ch := e.channel(channel)
	if ch == nil {
		return false
	}
	_, ok := ch.Provider.(adapters.TaskFetcher)
	return ok
}

func taskFiles(t *store.Task) []adapters.TaskFile {
	var files []adapters.TaskFile
	if t.Files != "" {
		_ = json.Unmarshal([]byte(t.Files), &files) // written by the poller from valid files
	}
	return files
}

// OpenFile starts the download of file n of a user's finished task from
// the upstream, with the channel's key. The caller copies the answer's
// body, at most limit bytes, and closes it.
func (e *Engine) OpenFile(ctx context.Context, log *zap.Logger, userID int64, taskID, n string) (resp *http.Response, limit int64, ae *adapters.Error) {
	t, ae := e.Own(ctx, log, userID, taskID)
	if ae != nil {
		return nil, 0, ae
	}
	i, err := strconv.Atoi(n)
	files := taskFiles(t)
	if err != nil || i < 0 || i >= len(files) || t.Status != adapters.TaskFinished {
		return nil, 0, &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "file_not_found",
			Message: "the task has no such file: GET " + StatusPrefix + t.ID + " lists its files once it has finished"}
	}
	ch := e.channel(t.Channel)
	var fetcher adapters.TaskFetcher
	if ch != nil {
		fetcher, _ = ch.Provider.(adapters.TaskFetcher)
	}
	if fetcher == nil {
		return nil, 0, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI,
			"the channel that ran this task is no longer configured, so its file cannot be fetched")
	}
	fctx, cancel := context.WithTimeout(ctx, ch.Timeout)
	req, err := fetcher.FetchFile(fctx, ch.upstream(t.Model), t.UpstreamID, files[i])
	if err != nil {
		cancel()
		return nil, 0, e.ClientError(err, ch)
	}
	resp, err = fetchFollowing(ch.Client, req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, 0, adapters.ClientClosed()
		}
		log.Warn("fetching a task's file", zap.String("task_id", t.ID), zap.String("error", engine.MaskKeys(err.Error(), ch.Keys)))
		return nil, 0, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream did not deliver the file; try again shortly")
	}
	resp.Body = cancelingBody{ReadCloser: resp.Body, cancel: cancel}
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		status := http.StatusBadGateway
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
			status = http.StatusGone
		}
		return nil, 0, adapters.Errorf(status, adapters.ErrAPI, "the upstream answered %d for the file (a vendor keeps files for a limited time)", resp.StatusCode)
	}
	limit = e.cfg.MaxFileSize
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, 0, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the file is larger than the gateway's limit of %d bytes (tasks max_file_size)", limit)
	}
	return resp, limit, nil
}

// cancelingBody ends the download's deadline with its body.
type cancelingBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelingBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// fetchFollowing sends a file request and follows up to three redirects
// (a vendor's download address often sends to signed storage), without the
// first request's headers: the key goes only where FetchFile sent it.
func fetchFollowing(c *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := c.Do(req)
	for hops := 0; err == nil && hops < 3; hops++ {
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			return resp, nil
		}
		loc, lerr := resp.Location()
		resp.Body.Close()
		if lerr != nil || (loc.Scheme != "https" && loc.Scheme != "http") {
			return nil, fmt.Errorf("the file's redirect has no usable location")
		}
		next, nerr := http.NewRequestWithContext(req.Context(), http.MethodGet, loc.String(), nil)
		if nerr != nil {
			return nil, nerr
		}
		resp, err = c.Do(next)
	}
	return resp, err
}
