package accountapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/store"
)

// usageSieveQuery reads the administrators' usage filters the store
// applies: token_id, channel, status ("ok", "error" or a status code) and
// request_id (the gateway's or the upstream's id, exactly).
func usageSieveQuery(r *http.Request, f *store.UsageFilter) error {
	q := r.URL.Query()
	f.Channel, f.Status, f.RequestID = q.Get("channel"), q.Get("status"), strings.TrimSpace(q.Get("request_id"))
	if v := q.Get("token_id"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return badRequest("invalid_token_id", "token_id must be a key's id, not %q", v)
		}
		f.TokenID = n
	}
	if f.Status != "" && f.Status != store.UsageStatusOK && f.Status != store.UsageStatusError {
		if n, err := strconv.Atoi(f.Status); err != nil || n < 100 || n > 999 {
			return badRequest("invalid_status", "status must be ok, error or a status code such as 429, not %q", f.Status)
		}
	}
	return nil
}
