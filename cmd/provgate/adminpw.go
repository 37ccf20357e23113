package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/atomicfile"
	"github.com/provgate/provgate/backend/objects"
	"github.com/provgate/provgate/gateway/auth"
)

const (
	initialAdminPassFile  = "initial-admin-password"
	generatedPasswordSize = 26 // rand.Text's length: 128 bits of base32
)

// initialAdminPassword returns the password for the first-start admin user
// (docs/design.md §15.2): the configured one, or a random one that is printed once to
// stdout and written to <data-dir>/initial-admin-password (mode 0600). Call it
// only when the store has no users: a later start must never replace the
// password.
func initialAdminPassword(cfg Config, stdout io.Writer) (pw string, generated bool, err error) {
	if cfg.AdminPassword != "" {
		return cfg.AdminPassword, false, nil
	}
	pw = rand.Text()
	path := filepath.Join(cfg.DataDir, initialAdminPassFile)
	// A stale file from an earlier, discarded store is replaced: the file
	// must always hold the password that works.
	if err := atomicfile.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("write initial admin password: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "Initial admin password for user %s: %s\n(shown only once; also saved in %s)\n", objects.AdminUser, pw, path); err != nil {
		return "", false, err
	}
	return pw, true, nil
}

// warnAdminPasswordIgnored logs a warning when --admin-password was given
// but the store already had users, so it changed nothing (docs/design.md
// §15.2), unless it is the admin's password anyway (a restart with the same
// configuration).
func warnAdminPasswordIgnored(ctx context.Context, pw string, accounts *objects.Accounts, logger *slog.Logger) {
	hash, _, err := accounts.PasswordHash(backend.WithSystem(ctx), objects.AdminUser)
	if err == nil && auth.CheckPassword(hash, pw) {
		return
	}
	logger.Warn("--admin-password ignored: it sets the password of " + objects.AdminUser +
		" only on the first start, and this store has users already; to set a password, use the API, or stop the server and run" +
		" provgate admin reset-password USER with the server's store flags")
}
