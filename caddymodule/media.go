package caddymodule

// Media endpoints (image generations and edits, speech, transcriptions)
// are served by relayhttp; their Caddyfile options are here, their prices'
// (an image line) billing's ParseImagePrice.

// defaultMaxUploadSize is max_upload_size's default: OpenAI's own limit
// for an audio file.
const defaultMaxUploadSize = 25 << 20

// defaultMaxInflightUploads is max_inflight_uploads' default.
const defaultMaxInflightUploads = 1 << 30
