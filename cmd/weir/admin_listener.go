package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/weir-broker/weir/config"
)

// listenAdmin binds admin_addr, behind TLS when admin_tls is set. The
// certificate files are looked at for renewals until ctx ends; a client
// certificate the listener verifies (client_auth requested or required)
// authenticates its holder when admin_api_require_auth is on.
func listenAdmin(ctx context.Context, node config.Node, logger *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", node.AdminAddr)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	if node.AdminTLS == nil {
		return ln, nil
	}
	reloader, err := config.NewTLSReloader(*node.AdminTLS, logger.With("listener", "admin"))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin listener: admin_tls: %w", err)
	}
	go reloader.Run(ctx, 0)
	logger.Info("admin API serves HTTPS", "admin_addr", ln.Addr().String(), "client_auth", node.AdminTLS.ClientAuth)
	return tls.NewListener(ln, reloader.Config()), nil
}

// newAdminServer serves h. net/http's own complaints (a failed TLS
// handshake, a malformed request) go to the broker's log rather than to
// the standard logger.
func newAdminServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.With("listener", "admin").Handler(), slog.LevelWarn),
	}
}
