# Builds the gateway with xcaddy and puts it in the official Caddy image.
# mattn/go-sqlite3 needs cgo, so the builder gets gcc and musl headers.
#
#   docker build -f xcaddy.Dockerfile -t caddy-model-gateway .
#   docker run -p 8080:8080 -v gateway-data:/data caddy-model-gateway
FROM caddy:2-builder-alpine AS builder
RUN apk add --no-cache build-base
ENV CGO_ENABLED=1
# go.mod asks for the lowest Go the code needs (1.26.0); the image pins its
# own Go with GOTOOLCHAIN=local, so let the go command fetch a newer
# toolchain when the image's is older, instead of failing
ENV GOTOOLCHAIN=auto
WORKDIR /src
COPY . .
RUN xcaddy build --output /usr/bin/caddy \
	--with github.com/caddy-model-gateway/gateway=/src

FROM caddy:2-alpine
COPY --from=builder /usr/bin/caddy /usr/bin/caddy
COPY Caddyfile.example /etc/caddy/Caddyfile
ENV GATEWAY_DB=/data/gateway.db
EXPOSE 8080
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
