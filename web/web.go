// Package web is the gateway's web console: plain HTML, CSS and JavaScript
// embedded in the binary, with no build step and nothing fetched from
// elsewhere. The pages are html/template files the console handler fills in
// (the API base address, whether registration is open); everything else is
// done by the scripts through the account API. It must not import anything
// of the gateway's.
package web

import "embed"

// Files holds the pages (*.html) and their assets (*.css, *.js).
//
//go:embed *.html *.css *.js
var Files embed.FS
