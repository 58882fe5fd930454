# syntax=docker/dockerfile:1
# Multi-stage build: a static weir and weirctl on a minimal base, run as
# a non-root user with the data directory on a volume.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/weir ./cmd/weir \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/weirctl ./cmd/weirctl \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/weir /out/weirctl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/weir
USER 65532:65532
VOLUME ["/var/lib/weir"]
# 9092 Kafka, 9644 admin HTTP API, 33145 internal RPC.
EXPOSE 9092 9644 33145
ENV WEIR_DATA_DIR=/var/lib/weir \
    WEIR_KAFKA_ADDR=0.0.0.0:9092 \
    WEIR_ADVERTISED_KAFKA_ADDR=localhost:9092 \
    WEIR_ADMIN_ADDR=0.0.0.0:9644 \
    WEIR_RPC_ADDR=0.0.0.0:33145
ENTRYPOINT ["/usr/local/bin/weir"]
