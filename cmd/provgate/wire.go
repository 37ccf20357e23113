package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/gofiber/fiber/v2"
)

// buildApp is the one place that assembles the concrete pieces (store,
// policies, gateway). This is a placeholder until they are wired in: it
// serves only GET /api/v3/info.
func buildApp(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) (app *fiber.App, cleanup func(), err error) {
	app = fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             int(cfg.BodyLimit),
	})
	app.Get("/api/v3/info", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"version": versionString(), "features": []string{}})
	})
	return app, func() {}, nil
}
