// Package accesslog writes an access log line in place of Caddy's server,
// for a request whose credentials a handler stripped after the server
// copied it.
package accesslog

import (
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Caddy's access log writes the request as it arrived, copied before any
// handler runs, and redacts only Authorization and cookies. A key sent in
// another header, in the query or as a WebSocket subprotocol would so
// reach whatever log a site configures, filter or not. For a request
// whose key gateway_auth stripped from such a place, the gateway skips
// Caddy's line (log_skip) and writes the same line itself, to the same
// loggers, with the request as stripped.

// Footprint measures the parts of a request a key can travel in besides
// Authorization: stripping a key always shrinks it.
func Footprint(r *http.Request) int {
	n := len(r.URL.RawQuery)
	for k, vs := range r.Header {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}

// Line writes one request's access log line in place of Caddy's.
type Line struct {
	srv       *caddyhttp.Server
	log       *zap.Logger // http.log.access, as Caddy's server has it
	requestID string
	request   *http.Request
	rec       caddyhttp.ResponseRecorder
	body      *countingBody
	start     time.Time
	// redacted are response headers whose values the line hides
	redacted []string
}

// RedactResponseHeader hides the values of the response header name in
// the line, as Caddy hides Set-Cookie: for an answer that must carry a
// secret to the client (a redirect with one in its address).
func (l *Line) RedactResponseHeader(name string) {
	l.redacted = append(l.redacted, http.CanonicalHeaderKey(name))
}

// TakeOver arranges for the access log line of r, whose credentials are
// already stripped, to show it as stripped: it skips Caddy's line and
// returns the writer to answer through and the line, to Write when the
// request is done; when the server logs no access for r, it returns w and
// nil. base is Caddy's http.log.access logger; requestID goes in the line.
func TakeOver(w http.ResponseWriter, r *http.Request, base *zap.Logger, requestID string) (http.ResponseWriter, *Line) {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Logs == nil || !logsHost(srv.Logs, r.Host) {
		return w, nil
	}
	if skip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.LogSkipVar).(bool); skip {
		return w, nil
	}
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	l := &Line{srv: srv, log: base, requestID: requestID, request: r.Clone(r.Context()), start: time.Now()}
	if r.Body != nil && r.Body != http.NoBody {
		l.body = &countingBody{ReadCloser: r.Body}
		r.Body = l.body
	}
	l.rec = caddyhttp.NewResponseRecorder(w, nil, nil)
	return l.rec, l
}

// Write writes the line as Caddy's server would (its message, level and
// fields), with the gateway's own extra fields; fields other handlers add
// to Caddy's line (log_append) are not in it.
func (l *Line) Write() {
	ctx := l.request.Context()
	status := l.rec.Status()
	level := zapcore.InfoLevel
	if status >= 500 {
		level = zapcore.ErrorLevel
	}
	if name, ok := caddyhttp.GetVar(ctx, caddyhttp.LogLevelVar).(string); ok {
		if lv, err := zapcore.ParseLevel(name); err == nil && lv >= zapcore.DebugLevel && lv <= zapcore.ErrorLevel {
			level = lv
		}
	}
	var fields []zapcore.Field
	for _, logger := range accessLoggers(l.srv.Logs, l.log, l.request) {
		ce := logger.Check(level, "handled request")
		if ce == nil {
			continue
		}
		if fields == nil {
			fields = l.fields(status)
		}
		ce.Write(fields...)
	}
}

func (l *Line) fields(status int) []zapcore.Field {
	ctx := l.request.Context()
	read := 0
	if l.body != nil {
		read = l.body.n
	}
	var userID string
	if repl, ok := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		userID, _ = repl.GetString("http.auth.user.id")
	}
	creds := l.srv.Logs.ShouldLogCredentials
	fields := []zapcore.Field{
		zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: l.request, ShouldLogCredentials: creds}),
		zap.Int("bytes_read", read),
		zap.String("user_id", userID),
		zap.Duration("duration", time.Since(l.start)),
		zap.Int("size", l.rec.Size()),
		zap.Int("status", status),
		zap.Object("resp_headers", caddyhttp.LoggableHTTPHeader{Header: l.responseHeader(), ShouldLogCredentials: creds}),
	}
	// the fields Caddy's tracing adds to its own line
	if tid, ok := caddyhttp.GetVar(ctx, "trace_id").(string); ok {
		fields = append(fields, zap.String("traceID", tid), zap.Any("spanID", caddyhttp.GetVar(ctx, "span_id")))
	}
	if l.requestID != "" {
		fields = append(fields, zap.String("request_id", l.requestID))
	}
	if uid, ok := caddyhttp.GetVar(ctx, "gateway.user_id").(int64); ok {
		fields = append(fields, zap.Int64("gateway_user_id", uid),
			zap.Any("gateway_user", caddyhttp.GetVar(ctx, "gateway.username")),
			zap.Any("gateway_token_id", caddyhttp.GetVar(ctx, "gateway.token_id")))
	}
	return fields
}

// responseHeader is the response's header as the line shows it.
func (l *Line) responseHeader() http.Header {
	h := l.rec.Header()
	if len(l.redacted) == 0 {
		return h
	}
	h = h.Clone()
	for _, name := range l.redacted {
		if vs := h[name]; len(vs) > 0 {
			h[name] = []string{"REDACTED"}
		}
	}
	return h
}

// logsHost is Caddy's server's choice of whether to log a request to host.
func logsHost(slc *caddyhttp.ServerLogConfig, host string) bool {
	host = hostOnly(host)
	for name := range slc.LoggerNames {
		if certmagic.MatchWildcard(host, name) {
			return true
		}
	}
	for _, skip := range slc.SkipHosts {
		if certmagic.MatchWildcard(host, skip) {
			return false
		}
	}
	return !slc.SkipUnmappedHosts
}

// accessLoggers are the loggers Caddy's server writes r's line to: the
// names a handler chose (log_name), else those of r's host, else the
// server's default.
func accessLoggers(slc *caddyhttp.ServerLogConfig, base *zap.Logger, r *http.Request) []*zap.Logger {
	var names []string
	if chosen, ok := caddyhttp.GetVar(r.Context(), caddyhttp.AccessLoggerNameVarKey).([]any); ok {
		for _, n := range chosen {
			s, _ := n.(string)
			names = append(names, s)
		}
	} else {
		names = loggerNames(slc, strings.ToLower(hostOnly(r.Host)))
	}
	loggers := make([]*zap.Logger, 0, len(names))
	for _, n := range names {
		if n == "" {
			loggers = append(loggers, base)
		} else {
			loggers = append(loggers, base.Named(n))
		}
	}
	return loggers
}

// loggerNames looks host up as Caddy does: exactly, then with one label
// after another made a wildcard.
func loggerNames(slc *caddyhttp.ServerLogConfig, host string) []string {
	if names, ok := slc.LoggerNames[host]; ok {
		return []string(names)
	}
	labels := strings.Split(host, ".")
	for i := range labels {
		if labels[i] == "" {
			continue
		}
		labels[i] = "*"
		if names, ok := slc.LoggerNames[strings.Join(labels, ".")]; ok {
			return []string(names)
		}
	}
	return []string{slc.DefaultLoggerName}
}

func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return hostport
}

// countingBody counts the request body's bytes read, for bytes_read.
type countingBody struct {
	io.ReadCloser
	n int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}
