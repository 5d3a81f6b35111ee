package store

// Data source names: what the gateway may show of one, and when two name
// the same database.

import (
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// DatabaseKey names a database once however its path is written, so two
// spellings of one SQLite file share one ledger.
func DatabaseKey(driver, dsn string) string {
	if driver == "sqlite" && dsn != ":memory:" && !strings.HasPrefix(dsn, "file:") {
		if abs, err := filepath.Abs(dsn); err == nil {
			dsn = abs
			// the file may not exist yet: resolve its directory then
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				dsn = real
			} else if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
				dsn = filepath.Join(dir, filepath.Base(abs))
			}
		}
	}
	return driver + ":" + dsn
}

// redacted stands in for a password in a data source name.
const redacted = "xxxxx"

// dsnPassword is a password=value pair of a key=value DSN or of a URL's
// query, the value bare or single-quoted with backslash escapes.
var dsnPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`)

// RedactDSN is the database's data source name fit for a log line or an
// error: a PostgreSQL password, in a URL's user part, its query or a
// key=value pair, is replaced. A URL that does not parse is not shown.
func RedactDSN(driver, dsn string) string {
	if driver == "sqlite" {
		return dsn
	}
	if scheme, _, ok := strings.Cut(dsn, "://"); ok {
		u, err := url.Parse(dsn)
		if err != nil {
			return scheme + "://(a URL that does not parse)"
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", redacted)
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return dsnPassword.ReplaceAllString(dsn, "${1}"+redacted)
}

// DSNHoldsPassword says whether a data source name as configured, before
// placeholders are replaced, carries a password of its own: the admin API
// serves the configuration, so the password belongs in a placeholder.
func DSNHoldsPassword(driver, dsn string) bool {
	if driver == "sqlite" {
		return false
	}
	plain := func(s string) bool { return s != "" && s != redacted && !strings.Contains(s, "{") }
	if _, _, ok := strings.Cut(dsn, "://"); ok {
		if u, err := url.Parse(dsn); err == nil {
			pw, _ := u.User.Password()
			return plain(pw) || plain(u.Query().Get("password"))
		}
	}
	for _, m := range dsnPassword.FindAllStringSubmatch(dsn, -1) {
		if plain(strings.Trim(m[2], "'")) {
			return true
		}
	}
	return false
}
