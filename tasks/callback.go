package tasks

import (
	"net/netip"
	"net/url"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// CheckCallbackURL accepts an absolute https URL whose host is a name
// other than localhost, or an address adapters.CheckPublicAddr (the policy
// the image fetcher dials by) accepts, judged on the URL alone: the vendor
// calls it, not the gateway, so no name is resolved here.
func CheckCallbackURL(raw, prefix string) *adapters.Error {
	where := "'" + prefix + "metadata.callback_url'"
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return adapters.BadRequest("%s must be an absolute https URL, e.g. https://example.com/hooks/video", where)
	}
	if !strings.EqualFold(u.Scheme, "https") {
		return adapters.BadRequest("%s must use https, not %s: the vendor posts the task's result to it", where, u.Scheme)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return adapters.BadRequest("%s has no host", where)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return adapters.BadRequest("%s points at localhost: give an address the vendor can reach on the internet", where)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := adapters.CheckPublicAddr(ip); err != nil {
			return adapters.BadRequest("%s is not on the public internet (%v): give an address the vendor can reach on the internet", where, err)
		}
		return nil
	}
	// a last label of digits or hex is an IP in a form netip does not read
	// (127.1, 2130706433, 0x7f.0.0.1), which resolvers still take
	labels := strings.Split(host, ".")
	if last := labels[len(labels)-1]; last == "" || strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return adapters.BadRequest("%s has %q as its host, which is neither a name nor an IP address in dotted form", where, host)
	}
	return nil
}
