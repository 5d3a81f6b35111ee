// Command mock runs the benchmark's fake OpenAI upstream on its own, for
// trying a gateway by hand:
//
//	go run ./bench/cmd/mock -addr 127.0.0.1:9999 -chunk-delay 50ms
package main

import (
	"flag"
	"log"
	"net"

	"github.com/caddy-model-gateway/gateway/bench/mock"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9999", "address to listen on")
	delay := flag.Duration("chunk-delay", 0, "pause between stream events")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("mock OpenAI upstream on http://%s (POST /v1/chat/completions, GET /_mock/stats)", ln.Addr())
	srv := mock.NewServer(mock.New(*delay))
	log.Fatal(srv.Serve(ln))
}
