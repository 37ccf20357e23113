package gateway

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
)

// jobRoutes serves job requests, job logs and a job's rendered actions.
type jobRoutes struct {
	jobs Jobs
	// tokens mints job tokens; nil mints none.
	tokens  JobTokens
	actions JobActions
}

func (j jobRoutes) serves() serves {
	out := serves{claims.ServeCreateJob: j.create, claims.ServeGetJobLog: j.log,
		claims.ServePutJobLog: j.appendLog}.unless(j.jobs == nil)
	out[claims.ServeJobActions] = nilUnless(j.actions != nil, j.jobActions)
	return out
}

func (j jobRoutes) create(c *fiber.Ctx) error {
	outcome, job, err := j.jobs.CreateJob(userContext(c), c.Body())
	if err != nil {
		return err
	}
	status := jobStatus(outcome)
	if job == nil {
		c.Status(status)
		return c.Send(nil)
	}
	// The token is in this reply only: never stored, never in events.
	if j.tokens != nil {
		tok, err := j.tokens.JobToken(userContext(c), job, principalOf(c))
		if err != nil {
			return err
		}
		job.Token = tok
	}
	return c.Status(status).JSON(job)
}

// jobStatus is DRP's status for a job request's outcome: 201 for a new
// job, 202 for an incomplete job handed back, 204 for nothing to run.
func jobStatus(o backend.JobOutcome) int {
	switch o {
	case backend.JobNew:
		return fiber.StatusCreated
	case backend.JobAgain:
		return fiber.StatusAccepted
	}
	return fiber.StatusNoContent
}

func (j jobRoutes) log(c *fiber.Ctx) error {
	b, err := j.jobs.JobLog(userContext(c), routeKey(c))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	return c.Send(b)
}

func (j jobRoutes) appendLog(c *fiber.Ctx) error {
	if ct := string(c.Request().Header.ContentType()); !strings.HasPrefix(ct, fiber.MIMEOctetStream) {
		return backend.NewError(backend.EUNSUPPORTED, "PUT", "jobs", routeKey(c), "Invalid content type: "+ct)
	}
	if err := j.jobs.AppendJobLog(userContext(c), routeKey(c), c.Body()); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (j jobRoutes) jobActions(c *fiber.Ctx) error {
	out, err := j.actions.JobActions(userContext(c), routeKey(c), strings.Clone(c.Query("os", "linux")))
	if err != nil {
		return err
	}
	return c.JSON(out)
}
