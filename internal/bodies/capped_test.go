package bodies

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCapped(t *testing.T) {
	for _, tt := range []struct {
		body string
		n    int64
		err  error
	}{{"abcd", 4, nil}, {"abc", 4, nil}, {"abcde", 4, ErrTooLarge}, {"", 0, nil}} {
		b, err := io.ReadAll(&Capped{R: strings.NewReader(tt.body), N: tt.n})
		if !errors.Is(err, tt.err) || (err == nil && string(b) != tt.body) {
			t.Errorf("%q capped at %d: %q, %v", tt.body, tt.n, b, err)
		}
	}
}
