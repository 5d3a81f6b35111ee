package caddymodule

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// Three placeholders bring settings and secrets into the Caddyfile, and a
// reload reads each from a different place:
//
//   - {$X} is replaced when the Caddyfile is adapted, from the environment
//     of the process that adapts it: `caddy run` at start, but the shell
//     running `caddy reload` at a reload (a plain `caddy reload` gives an
//     unset X's default, or nothing);
//   - {env.X} is replaced by the running gateway when it loads the config,
//     at start and at every reload, from its own environment, which a
//     reload cannot change (`X=new caddy reload` keeps the old value);
//   - {file.PATH} is read by the running gateway at every load: the way to
//     rotate a key without a restart.
//
// So that a reload does not turn a setting off unnoticed, `caddy reload`
// warns of the {$X} it finds unset, and the gateway names the {env.X}
// behind a key or secret that came out empty.

// envPlaceholder is {env.NAME}.
var envPlaceholder = regexp.MustCompile(`\{env\.([^{}]+)\}`)

// unsetEnv names the variables of the {env.X} placeholders in values
// that are empty in this process's environment.
func unsetEnv(values ...string) []string {
	var out []string
	for _, v := range values {
		for _, m := range envPlaceholder.FindAllStringSubmatch(v, -1) {
			if os.Getenv(m[1]) == "" {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// adaptVar is {$NAME} or {$NAME:default}, as Caddy's Caddyfile lexer
// replaces them.
var adaptVar = regexp.MustCompile(`\{\$([^{}:$]+)(?::([^{}]*))?\}`)

// reloadWarned makes the warning once per adaptation: a second gateway
// block reads the same file.
var reloadWarned sync.Once

// warnReloadVars is called while the gateway's options are adapted. In
// `caddy reload` it reads the Caddyfile it adapts again and warns, in one
// line, of every {$X} not set in this command's environment: each setting
// given so takes its default here, whatever the running gateway was
// started with.
func warnReloadVars(file string) {
	if len(os.Args) < 2 || os.Args[1] != "reload" || file == "" {
		return
	}
	reloadWarned.Do(func() {
		body, err := os.ReadFile(file)
		if err != nil {
			return
		}
		var unset []string
		seen := map[string]bool{}
		for n, line := range strings.Split(string(body), "\n") {
			for _, m := range adaptVar.FindAllStringSubmatch(line, -1) {
				if _, ok := os.LookupEnv(m[1]); ok || seen[m[1]] {
					continue
				}
				seen[m[1]] = true
				what := "empty"
				if m[2] != "" {
					what = fmt.Sprintf("its default %q", m[2])
				}
				directive, _, _ := strings.Cut(strings.TrimSpace(line), " ")
				unset = append(unset, fmt.Sprintf("%s (line %d, %s: %s)", m[1], n+1, directive, what))
			}
		}
		if len(unset) > 0 {
			caddy.Log().Named("gateway").Warn("caddy reload reads {$X} from its own environment, not from the running gateway's: "+
				"these are not set here, so the settings they give are what follows, whatever the gateway was started with; "+
				"set them for caddy reload, or write {env.X} (the gateway's own environment, read at every reload) or {file.PATH} (read at every reload)",
				zap.Strings("unset", unset))
		}
	})
}
