package callback

import (
	"context"
	"time"

	"github.com/provgate/provgate/backend"
)

// Delivery states.
const (
	DeliveryPending = "pending"
	DeliveryDone    = "done"
	DeliveryFailed  = "failed"
)

// Delivery is one queued event callback. Its fields are those of
// store.Delivery, so the store's values convert with a plain conversion
// (callback.Delivery(d)) in the adapter cmd builds.
type Delivery struct {
	ID         int64
	Plugin     string
	Callback   string
	Machine    string
	Job        string
	Payload    []byte
	Attempts   int
	State      string // pending, done or failed
	LastError  string
	NextAt     time.Time
	LeaseUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Attempt is one recorded callback request, shaped like store.CallbackAttempt.
type Attempt struct {
	ID         int64
	Plugin     string
	Callback   string
	Machine    string
	Source     string // "action" or "jobfail"
	Attempt    int
	Status     int // 0 when no response arrived
	DurationMs int64
	Error      string // secrets redacted
	At         time.Time
}

// Sources of attempts.
const (
	SourceAction  = "action"
	SourceJobFail = "jobfail"
)

// AttemptQuery selects recorded attempts, newest first (by At, then ID);
// it is shaped like store.AttemptQuery. A non-zero AfterID continues a
// listing after the attempt with AfterAt and AfterID.
type AttemptQuery struct {
	Plugin, Machine string
	Limit           int
	AfterAt         time.Time
	AfterID         int64
}

// Store is what the service needs from the durable store.
//
// ClaimDeliveries returns up to n pending deliveries whose NextAt has come and
// whose lease has expired, leases them until now+lease, and counts the claim
// as an attempt: the returned Attempts includes this one (so a delivery that
// crashes its worker still runs out of attempts). EnqueueDelivery should be
// idempotent on (Plugin, Callback, Job); an ECONFLICT answer is taken as
// "already queued".
type Store interface {
	EnqueueDelivery(ctx context.Context, d Delivery) (int64, error)
	ClaimDeliveries(ctx context.Context, n int, lease time.Duration) ([]Delivery, error)
	FinishDelivery(ctx context.Context, id int64, state, lastErr string, nextAt time.Time) error
	RecordAttempt(ctx context.Context, a Attempt) error
	ListAttempts(ctx context.Context, q AttemptQuery) ([]Attempt, error)
}

// Machines reads machines and their params for the service.
type Machines interface {
	// GetMachine returns the machine by Uuid (ENOTFOUND when absent).
	GetMachine(ctx context.Context, uuid string) (*backend.Machine, error)
	// MachineParams returns the machine's params: only its own, or the
	// aggregated hierarchy (machine, profiles, stage, global); Secure params
	// decrypted only when decode is true.
	MachineParams(ctx context.Context, m *backend.Machine, aggregate, decode bool) (map[string]any, error)
}

// Plugins lists the configured plugins (the jobfail trigger looks for
// callback plugins holding a jobfail callback).
type Plugins interface {
	ListPlugins(ctx context.Context) ([]*backend.Plugin, error)
}
