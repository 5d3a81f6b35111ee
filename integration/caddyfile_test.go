package integration

import (
	"strings"
	"testing"
)

// caddyfile builds the Caddyfile a test starts its gateway from, so that
// the test states only what differs from the common base: an admin
// endpoint, a SQLite database in the scratch directory and one site on
// loopback that authenticates and relays:
//
//	{
//		admin {{ADMIN}}
//		gateway {
//			database sqlite {{DB}}
//			<options> <channels> <prices>
//		}
//	}
//	http://127.0.0.1:{{PORT}} {
//		route {
//			gateway_auth
//			gateway_relay
//		}
//	}
//
// Text may hold {{VARS}} for gatewaytest.Start to fill in, and nested
// blocks (see block); String indents them. Options, channels and prices
// are named (an option by its first word), and setting one again replaces
// it where it stands, so a variant of a shared configuration is the base
// plus the one thing it changes.
type caddyfile struct {
	servers  []string // the global servers block; none when empty
	database string
	address  string // the site's address
	options  []part
	channels []part
	prices   []part
	site     []string // the site's directives; nil: the relay route
}

// part is one named entry of the gateway block and its text.
type part struct{ name, text string }

// relayRoute is the base site: authenticate, then relay.
var relayRoute = block("route", "gateway_auth", "gateway_relay")

// logToStderr writes the site's access log where the test shows it when
// it fails.
var logToStderr = block("log", "output stderr")

// gatewayConfig is the common base, for a test to add to.
func gatewayConfig() *caddyfile {
	return &caddyfile{database: "{{DB}}", address: "http://127.0.0.1:{{PORT}}"}
}

// block is "name {", the lines, "}".
func block(name string, lines ...string) string {
	return name + " {\n" + strings.Join(lines, "\n") + "\n}"
}

// withServers sets the lines of the global servers block (protocols,
// timeouts, trusted proxies).
func (c *caddyfile) withServers(lines ...string) *caddyfile {
	c.servers = lines
	return c
}

// withDatabase puts the SQLite database at dsn instead of {{DB}}.
func (c *caddyfile) withDatabase(dsn string) *caddyfile {
	c.database = dsn
	return c
}

// option sets a gateway option, a line or a block, named by its first
// word; "" sets nothing, for a test whose extra option is optional.
func (c *caddyfile) option(text string) *caddyfile {
	if text == "" {
		return c
	}
	c.options = set(c.options, part{strings.Fields(text)[0], text})
	return c
}

// without removes the gateway option named name.
func (c *caddyfile) without(name string) *caddyfile {
	for i, p := range c.options {
		if p.name == name {
			c.options = append(c.options[:i:i], c.options[i+1:]...)
			return c
		}
	}
	panic("caddyfile: no option " + name + " to remove")
}

// channel sets the channel name: its type (a block for an adapter's own
// options), base URL and key (left out when empty, as the demo family
// needs neither), the models it serves and any further lines.
func (c *caddyfile) channel(name, typ, baseURL, key, models string, more ...string) *caddyfile {
	lines := []string{"type " + typ}
	if baseURL != "" {
		lines = append(lines, "base_url "+baseURL)
	}
	if key != "" {
		lines = append(lines, "key "+key)
	}
	lines = append(lines, "models "+models)
	c.channels = set(c.channels, part{name, block("channel "+name, append(lines, more...)...)})
	return c
}

// price sets the price of model, one line for each of its terms.
func (c *caddyfile) price(model string, terms ...string) *caddyfile {
	c.prices = set(c.prices, part{model, block("price "+model, terms...)})
	return c
}

// free prices each of the models at nothing.
func (c *caddyfile) free(models ...string) *caddyfile {
	for _, m := range models {
		c.prices = set(c.prices, part{m, "price " + m + " free"})
	}
	return c
}

// withAddress serves the site at address instead of loopback only, for a
// test that needs requests to any host name to reach it.
func (c *caddyfile) withAddress(address string) *caddyfile {
	c.address = address
	return c
}

// withSite replaces the site's directives (the relay route by default).
func (c *caddyfile) withSite(directives ...string) *caddyfile {
	c.site = directives
	return c
}

// set replaces the part of the same name where it stands, or appends p.
func set(parts []part, p part) []part {
	for i := range parts {
		if parts[i].name == p.name {
			parts[i] = p
			return parts
		}
	}
	return append(parts, p)
}

// String is the Caddyfile, indented by nesting so that a failing test's
// logs show it readably.
func (c *caddyfile) String() string {
	lines := []string{"{", "admin {{ADMIN}}"}
	if len(c.servers) > 0 {
		lines = append(lines, block("servers", c.servers...))
	}
	lines = append(lines, "gateway {", "database sqlite "+c.database)
	for _, parts := range [][]part{c.options, c.channels, c.prices} {
		for _, p := range parts {
			lines = append(lines, p.text)
		}
	}
	lines = append(lines, "}", "}", "", c.address+" {")
	site := c.site
	if site == nil {
		site = []string{relayRoute}
	}
	lines = append(append(lines, site...), "}")
	return indent(strings.Join(lines, "\n"))
}

// indent reindents text one tab per open brace, whatever the indentation
// of the pieces it was built from.
func indent(text string) string {
	var b strings.Builder
	depth := 0
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "}") {
			depth--
		}
		if line != "" {
			b.WriteString(strings.Repeat("\t", depth))
		}
		b.WriteString(line)
		b.WriteByte('\n')
		if strings.HasSuffix(line, "{") {
			depth++
		}
	}
	return b.String()
}

// TestCaddyfileBuilder: the base is the configuration the builder's doc
// shows, a part set again keeps its place, and nested blocks are indented.
func TestCaddyfileBuilder(t *testing.T) {
	got := gatewayConfig().
		option("max_attempts 4").
		option(block("health", "consecutive_failures 2")).
		channel("a", "openai", "{{UP}}", "sk-a", "m1", "priority 10").
		channel("b", block("demo", "word_delay 1ns"), "", "", "demo").
		price("m1", "input 1", "output 2").
		free("demo").
		channel("a", "openai", "{{UP}}", "sk-a", "m2").
		option("max_attempts 3").
		String()
	want := `{
	admin {{ADMIN}}
	gateway {
		database sqlite {{DB}}
		max_attempts 3
		health {
			consecutive_failures 2
		}
		channel a {
			type openai
			base_url {{UP}}
			key sk-a
			models m2
		}
		channel b {
			type demo {
				word_delay 1ns
			}
			models demo
		}
		price m1 {
			input 1
			output 2
		}
		price demo free
	}
}

http://127.0.0.1:{{PORT}} {
	route {
		gateway_auth
		gateway_relay
	}
}
`
	if got != want {
		t.Fatalf("built:\n%s\nwant:\n%s", got, want)
	}
	if got := gatewayConfig().option("registration on").without("registration").String(); strings.Contains(got, "registration") {
		t.Fatalf("without left the option in:\n%s", got)
	}
}
