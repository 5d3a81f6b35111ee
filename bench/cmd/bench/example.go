package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The like-for-like pair: Caddyfile.example's own site (its access log, the
// health, account, console and task routes before the model routes) against
// a reverse_proxy site with the same log block, both in the main process.
// Issue 21 judges speed on this pair; the plain pair (no log, one route)
// shows what the gateway's own work costs.
const (
	proxyLogged    = "reverse_proxy_log"
	gatewayExample = "gateway_example"
)

// exampleSite is the site block of Caddyfile.example, address line and
// closing brace excluded, and its log block alone.
type exampleSite struct {
	body string // everything inside the site's braces
	log  string // the site's `log { ... }` block
}

// readExampleSite takes the last top-level block of Caddyfile.example (its
// one site) as it is, so the bench measures what `make run` serves.
func readExampleSite(root string) (exampleSite, error) {
	raw, err := os.ReadFile(filepath.Join(root, "Caddyfile.example"))
	if err != nil {
		return exampleSite{}, fmt.Errorf("reading the example's site: %w", err)
	}
	return parseExampleSite(string(raw))
}

func parseExampleSite(text string) (exampleSite, error) {
	lines := strings.Split(text, "\n")
	start := -1
	for i, l := range lines {
		// a top-level block opens at column 0; the global options block
		// is a bare "{"
		if strings.HasSuffix(strings.TrimRight(l, " \t"), "{") && l != "" && l[0] != '\t' && l[0] != ' ' && l[0] != '#' && strings.TrimSpace(l) != "{" {
			start = i
		}
	}
	if start < 0 {
		return exampleSite{}, errors.New("the file Caddyfile.example has no site block")
	}
	end := -1
	for i := start + 1; i < len(lines); i++ {
		if lines[i] == "}" {
			end = i
			break
		}
	}
	if end < 0 {
		return exampleSite{}, fmt.Errorf("the file Caddyfile.example: the site block at line %d does not close", start+1)
	}
	site := exampleSite{body: strings.Join(lines[start+1:end], "\n")}
	for i := start + 1; i < end; i++ {
		if strings.TrimSpace(lines[i]) != "log {" {
			continue
		}
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], "\t "))]
		for j := i + 1; j < end; j++ {
			if lines[j] == indent+"}" {
				site.log = strings.Join(lines[i:j+1], "\n")
				break
			}
		}
		break
	}
	if site.log == "" {
		return exampleSite{}, errors.New("the site of the file Caddyfile.example has no log block")
	}
	return site, nil
}
