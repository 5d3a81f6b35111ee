package accountapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// The administrators' usage log filters by what store.UsageFilter does
// not: a key, a channel, a status, a request id. Those are applied here,
// over the store's pages, within a bound of rows read per answer
// (maxSifted), so a filter that matches nothing costs one bounded scan,
// not the whole table; the answer then says how far back it looked and
// gives a cursor to look further.

// maxSifted is the most usage rows one filtered answer reads.
const maxSifted = 10000

// siftPage is how many rows are read from the store at a time.
const siftPage = 500

// rowSieve is the filters a row must pass; zero fields do not filter.
type rowSieve struct {
	tokenID   int64
	channel   string
	status    string // "ok" (2xx), "error" (any other) or one status code
	requestID string // the gateway's or the upstream's id, exactly
}

// rowSieveQuery reads token_id, channel, status and request_id; nil when
// none is set.
func rowSieveQuery(r *http.Request) (*rowSieve, error) {
	q := r.URL.Query()
	s := &rowSieve{channel: q.Get("channel"), status: q.Get("status"), requestID: strings.TrimSpace(q.Get("request_id"))}
	if v := q.Get("token_id"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, badRequest("invalid_token_id", "token_id must be a key's id, not %q", v)
		}
		s.tokenID = n
	}
	if s.status != "" && s.status != "ok" && s.status != "error" {
		if n, err := strconv.Atoi(s.status); err != nil || n < 100 || n > 999 {
			return nil, badRequest("invalid_status", "status must be ok, error or a status code such as 429, not %q", s.status)
		}
	}
	if *s == (rowSieve{}) {
		return nil, nil
	}
	return s, nil
}

func (s *rowSieve) keeps(l *store.UsageLog) bool {
	if s.tokenID != 0 && l.TokenID != s.tokenID || s.channel != "" && l.Channel != s.channel {
		return false
	}
	if s.requestID != "" && l.RequestID != s.requestID && l.UpstreamRequestID != s.requestID {
		return false
	}
	switch ok := l.Status/100 == 2; s.status {
	case "":
		return true
	case "ok":
		return ok
	case "error":
		return !ok
	default:
		return strconv.Itoa(l.Status) == s.status
	}
}

// siftUsage answers a page of the rows that pass s, newest first. When it
// stops at maxSifted rows read with fewer than a page found, the answer's
// next_cursor continues from the last row read and sifted_until says how
// far back it looked.
func (h *Handler) siftUsage(r *http.Request, f store.UsageFilter, s *rowSieve) (any, error) {
	want := f.Limit
	part := strings.TrimSpace(r.URL.Query().Get("model_contains"))
	found := []*store.UsageLog{}
	read := 0
	var last *store.UsageLog
	for read < maxSifted && len(found) < want {
		f.Limit = min(siftPage, maxSifted-read)
		rows, err := h.usageRows(r.Context(), f, part)
		if err != nil {
			return nil, err
		}
		for _, l := range rows {
			read++
			last = l
			if s.keeps(l) {
				found = append(found, l)
				if len(found) == want {
					break
				}
			}
		}
		if len(rows) < f.Limit {
			last = nil // the store has no more
			break
		}
		f.After = &store.UsageCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	out := map[string]any{"data": found, "next_cursor": "", "sifted": read}
	switch {
	case len(found) == want:
		l := found[len(found)-1]
		out["next_cursor"] = usageCursor(l)
	case last != nil:
		out["next_cursor"] = usageCursor(last)
		out["sifted_until"] = last.CreatedAt.UTC().Format(time.RFC3339)
	}
	return out, nil
}

func usageCursor(l *store.UsageLog) string {
	return fmt.Sprintf("%d_%d", l.CreatedAt.UnixMilli(), l.ID)
}
