package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/objects"
	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/gateway/auth"
)

// adminCommand runs "provgate admin reset-password USER": recovery that
// works on the store directly, with the server's own configuration (flags,
// environment, --config), while the server is stopped.
func adminCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, h hooks) error {
	return runSubcommand("admin", args, subcommand{"reset-password", func(args []string) error {
		return adminResetPassword(ctx, args, getenv, stdout, stderr, h.hashPassword())
	}})
}

// adminResetPassword sets a new password for one user and with it a new
// Secret, so that every token the user holds or granted stops working
// (docs/design.md §15.2). The password comes from --password-file ("-" is
// stdin), or is generated and printed once.
func adminResetPassword(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, hashPassword func(pw string) ([]byte, error)) error {
	const name = "admin reset-password"
	var user string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		user, args = args[0], args[1:]
	}
	var pwFile string
	cfg, err := loadConfigAs(name, args, getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&pwFile, "password-file", "", "`file` whose first line is the new password (\"-\" reads stdin); default: a random password, printed once")
	})
	if err != nil {
		return err
	}
	if user == "" {
		return usagef("%s: want USER, e.g. provgate %s %s [flags]", name, name, objects.AdminUser)
	}
	pw, generated, err := newPassword(pwFile, os.Stdin)
	if err != nil {
		return err
	}
	if cfg.Database == "" {
		// Never create an empty store where the server's is expected.
		if _, err := os.Stat(cfg.DatabaseDSN()); err != nil {
			return fmt.Errorf("%s: no store at %s: %w (give the server's --data-dir, --database or --config)", name, cfg.DatabaseDSN(), pathErr(err))
		}
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	kinds := backend.NewCatalog()
	st, err := store.Open(ctx, cfg.DatabaseDSN(), store.Options{Logger: logger, Kinds: kinds})
	if err != nil {
		return err
	}
	defer st.Close()
	obj := objects.New(st, objects.Options{Kinds: kinds, Logger: logger, HashPassword: hashPassword, NewSecret: auth.NewSecret})
	// No request drives this: the operator at the server's console is the
	// caller (docs/design.md §2.3).
	if _, err := obj.Accounts.SetPassword(backend.WithSystem(ctx), user, pw); err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return fmt.Errorf("%s: user %s does not exist", name, user)
		}
		return fmt.Errorf("%s: %s", name, backend.AsError(err).Error())
	}
	if generated {
		_, err = fmt.Fprintf(stdout, "New password for user %s: %s\n(shown only once; the user's tokens no longer work)\n", user, pw)
		return err
	}
	_, err = fmt.Fprintf(stdout, "Password of user %s changed; the user's tokens no longer work\n", user)
	return err
}

// newPassword reads the first line of file ("-" reads stdin), or generates
// a random password when file is empty.
func newPassword(file string, stdin io.Reader) (pw string, generated bool, err error) {
	if file == "" {
		return rand.Text(), true, nil
	}
	var r io.Reader = stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return "", false, fmt.Errorf("--password-file %s: %w", file, pathErr(err))
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("--password-file %s: %w", file, err)
	}
	pw = strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", false, usagef("--password-file %s: the first line is empty", file)
	}
	return pw, false, nil
}
