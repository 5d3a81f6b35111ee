package gateway

import (
	_ "github.com/anthropics/anthropic-sdk-go"
	_ "github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/mattn/go-sqlite3"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/pkoukk/tiktoken-go"
	_ "github.com/pkoukk/tiktoken-go-loader"
	_ "golang.org/x/crypto/bcrypt"
	_ "google.golang.org/genai"
	_ "github.com/coder/websocket"
)
