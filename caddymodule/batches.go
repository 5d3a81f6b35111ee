package caddymodule

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/gatewaydb"
	"github.com/caddy-model-gateway/gateway/tasks"
)

// BatchesConfig bounds the Files and Batch APIs: /v1/files, /v1/batches
// and /v1/messages/batches (docs/batches.md), which tasks/taskapi answers
// for gateway_relay.
type BatchesConfig struct {
	// Dir is where files' bytes are kept. Default: a directory "files"
	// beside the SQLite database (for PostgreSQL, in Caddy's data
	// directory; several instances need it shared).
	Dir string `json:"dir,omitempty"`
	// MaxFileSize bounds one uploaded file or one Anthropic batch's body.
	// Default 100 MiB.
	MaxFileSize int64 `json:"max_file_size,omitempty"`
	// MaxLines bounds the requests of one batch. Default 50,000.
	MaxLines int `json:"max_lines,omitempty"`
	// MaxResults bounds the results read back from a vendor for one
	// batch. Default 1 GiB.
	MaxResults int64 `json:"max_results,omitempty"`
	// LocalConcurrency bounds the lines of one batch run at once on the
	// gateway's own engine (a model whose channels have no batch API).
	// Default 4.
	LocalConcurrency int `json:"local_concurrency,omitempty"`
	// MaxUserStorage bounds the bytes of one user's files together.
	// Default 10 GiB.
	MaxUserStorage int64 `json:"max_user_storage,omitempty"`
	// FileRetention is how long files (uploads and batch outputs) are
	// kept; negative: for ever. Default 30 days.
	FileRetention caddy.Duration `json:"file_retention,omitempty"`
}

// dir is the files' directory for the database dbc.
func (c *BatchesConfig) dir(dbc DatabaseConfig) string {
	if c != nil && c.Dir != "" {
		return c.Dir
	}
	return gatewaydb.DefaultFiles(dbc.Driver, dbc.DSN, caddy.AppDataDir())
}

// apply sets the task engine's batch bounds.
func (c *BatchesConfig) apply(cfg *tasks.Config, dir string) {
	cfg.BatchDir = dir
	if c == nil {
		return
	}
	cfg.MaxBatchFile, cfg.MaxBatchLines, cfg.MaxBatchResults = c.MaxFileSize, c.MaxLines, c.MaxResults
	cfg.FileRetention, cfg.MaxUserFiles = time.Duration(c.FileRetention), c.MaxUserStorage
	cfg.LocalConcurrency = c.LocalConcurrency
}

// parseBatches reads `batches { dir <path> max_file_size <size> max_lines
// <n> max_results <size> max_user_storage <size> file_retention
// <duration>|off local_concurrency <n> }`.
func parseBatches(d *caddyfile.Dispenser) (*BatchesConfig, error) {
	bc := &BatchesConfig{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	err := eachOption(d, func(opt, v string) error {
		switch opt {
		case "dir":
			bc.Dir = v
		case "max_file_size", "max_results", "max_user_storage":
			size, err := parseSize(v)
			if err != nil || size <= 0 {
				return d.Errf("batches: %s must be a size above zero such as 100MiB, not %q", opt, v)
			}
			*map[string]*int64{"max_file_size": &bc.MaxFileSize, "max_results": &bc.MaxResults, "max_user_storage": &bc.MaxUserStorage}[opt] = size
		case "max_lines", "local_concurrency":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("batches: %s must be a positive integer, not %q", opt, v)
			}
			*map[string]*int{"max_lines": &bc.MaxLines, "local_concurrency": &bc.LocalConcurrency}[opt] = n
		case "file_retention":
			if v == "off" {
				bc.FileRetention = caddy.Duration(-1)
				return nil
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("batches: file_retention must be a duration such as 720h, or off, not %q", v)
			}
			bc.FileRetention = caddy.Duration(dur)
		default:
			return d.Errf("batches: unrecognized option %q (known: dir, max_file_size, max_lines, max_results, max_user_storage, file_retention, local_concurrency)", opt)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return bc, nil
}
