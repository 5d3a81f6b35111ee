package tasks

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Submission is a decoded POST /api/generate/submit body.
type Submission struct {
	Req adapters.TaskRequest
	// MetaKeys are metadata's member names, for the owned-field checks.
	MetaKeys []string
	// Form is FormA (fields at the top level) or FormB (inside input), for
	// messages that name where a field goes.
	Form string
}

// The two body forms.
const (
	FormA = "A"
	FormB = "B"
)

// Prefix is where the form puts the common fields, as messages name them:
// "" for form A, "input." for form B.
func (s *Submission) Prefix() string {
	if s.Form == FormB {
		return "input."
	}
	return ""
}

// Fields are the common generation fields, beside prompt in either
// form; their values are checked here, the rest is the vendor's.
var Fields = []string{"prompt", "metadata", "image", "duration", "aspect_ratio", "size", "negative_prompt", "seed"}

// MaxText bounds prompt, negative prompt, size and aspect ratio (the
// image, often base64, is bounded only by the body's size).
const MaxText = 32 << 10

// ParseSubmission decodes either body form. Form A puts model, prompt,
// metadata and the common fields at the top level; form B puts everything
// but model inside input. A body that mixes them, or puts callback_url
// anywhere but under metadata, is refused with where it belongs.
func ParseSubmission(body []byte) (*Submission, *adapters.Error) {
	top, e := object(body, "the request body")
	if e != nil {
		return nil, e
	}
	sub := &Submission{Form: FormA}
	rawModel, ok := top["model"]
	if !ok {
		return nil, adapters.BadRequest("'model' is required: name the task model at the top level, e.g. {\"model\": \"sora-2\", \"prompt\": \"...\"}")
	}
	if err := json.Unmarshal(rawModel, &sub.Req.Model); err != nil || sub.Req.Model == "" {
		return nil, adapters.BadRequest("'model' must be a non-empty string")
	}
	fields := top
	prefix := ""
	if rawInput, ok := top["input"]; ok {
		sub.Form, prefix = FormB, "input."
		var mixed []string
		for k := range top {
			if k != "model" && k != "input" {
				mixed = append(mixed, k)
			}
		}
		if len(mixed) > 0 {
			sort.Strings(mixed)
			return nil, adapters.BadRequest("the body mixes the two forms: with 'input', only 'model' stays at the top level; move %s into 'input' (or drop 'input' and put everything at the top level)", quoteList(mixed))
		}
		if fields, e = object(rawInput, "'input'"); e != nil {
			return nil, e
		}
	}
	for k := range fields {
		switch {
		case k == "callback_url":
			return nil, adapters.BadRequest("'%scallback_url' is not read there: it belongs under '%smetadata', as {\"%smetadata\": {\"callback_url\": \"https://...\"}}", prefix, prefix, prefix)
		case k == "model" && prefix != "":
			return nil, adapters.BadRequest("'input.model' is not read: 'model' belongs at the top level of the body")
		case k == "model":
		case !slices.Contains(Fields, k):
			return nil, adapters.BadRequest("'%s%s' is not a field of the task endpoint (known: %s); the vendor's own options go under '%smetadata'", prefix, k, strings.Join(Fields, ", "), prefix)
		}
	}
	if e := decodeTaskFields(fields, prefix, sub); e != nil {
		return nil, e
	}
	return sub, nil
}

func decodeTaskFields(f map[string]json.RawMessage, prefix string, sub *Submission) *adapters.Error {
	r := &sub.Req
	text := func(name string, dst *string) *adapters.Error {
		raw, ok := f[name]
		if !ok || string(raw) == "null" {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return adapters.BadRequest("'%s%s' must be a string", prefix, name)
		}
		if name != "image" && len(*dst) > MaxText {
			return adapters.BadRequest("'%s%s' is longer than %d bytes", prefix, name, MaxText)
		}
		return nil
	}
	for name, dst := range map[string]*string{"prompt": &r.Prompt, "image": &r.Image, "aspect_ratio": &r.AspectRatio,
		"size": &r.Size, "negative_prompt": &r.NegativePrompt} {
		if e := text(name, dst); e != nil {
			return e
		}
	}
	if strings.TrimSpace(r.Prompt) == "" && r.Image == "" {
		return adapters.BadRequest("'%sprompt' is required: describe what to generate (or give a first-frame 'image')", prefix)
	}
	if raw, ok := f["duration"]; ok && string(raw) != "null" {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 32)
		if err != nil || n <= 0 || n > 3600 {
			return adapters.BadRequest("'%sduration' must be a whole number of seconds between 1 and 3600, e.g. 8", prefix)
		}
		r.Duration = int(n)
	}
	if raw, ok := f["seed"]; ok && string(raw) != "null" {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err != nil {
			return adapters.BadRequest("'%sseed' must be an integer", prefix)
		}
		r.Seed = &n
	}
	raw, ok := f["metadata"]
	if !ok || string(raw) == "null" {
		return nil
	}
	meta, e := object(raw, "'"+prefix+"metadata'")
	if e != nil {
		return e
	}
	if cb, ok := meta["callback_url"]; ok {
		if err := json.Unmarshal(cb, &r.CallbackURL); err != nil {
			return adapters.BadRequest("'%smetadata.callback_url' must be a string", prefix)
		}
		if e := CheckCallbackURL(r.CallbackURL, prefix); e != nil {
			return e
		}
		delete(meta, "callback_url")
	}
	for k := range meta {
		sub.MetaKeys = append(sub.MetaKeys, k)
	}
	sort.Strings(sub.MetaKeys)
	if len(meta) > 0 {
		// the members as the client sent them, callback_url taken out
		b, err := json.Marshal(meta)
		if err != nil {
			return adapters.BadRequest("'%smetadata' could not be read", prefix)
		}
		r.Metadata = b
	}
	return nil
}

// object decodes a JSON object into its members, raw.
func object(raw []byte, what string) (map[string]json.RawMessage, *adapters.Error) {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, adapters.BadRequest("%s must be a JSON object", what)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, adapters.BadRequest("%s is not valid JSON: %v", what, err)
	}
	return m, nil
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}
