// Package spreadsheet makes text safe to hand to a spreadsheet: the CSV
// exports (usage rows, redemption codes) carry text that clients and
// upstreams chose (a model name, a request id, an error message), which a
// spreadsheet would otherwise run as a formula when the file is opened.
package spreadsheet

// Cell is s as a CSV text cell a spreadsheet shows as text: a cell that
// begins with a character that starts a formula (= + - @, or a tab or
// carriage return before one) gets a leading apostrophe, which
// spreadsheets read as "text follows" (OWASP's advice for CSV injection).
// Other text is returned as it is.
func Cell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}
