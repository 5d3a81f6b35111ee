package engine

import (
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Bounds of a model name.
const MaxModelName = 256

// CheckModelName refuses a model name that is too long or holds control
// characters: it ends up in logs, usage rows and upstream URLs.
func CheckModelName(m string) *adapters.Error {
	if len(m) > MaxModelName {
		return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "invalid_model",
			Message: "the model name is longer than " + strconv.Itoa(MaxModelName) + " bytes"}
	}
	for _, r := range m {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "invalid_model",
				Message: "the model name has a control character or invalid UTF-8 in it"}
		}
	}
	return nil
}

// Truncate keeps at most n bytes of s, for what a usage row stores.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
