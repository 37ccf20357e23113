package callback

import (
	"context"
	"time"

	"github.com/provgate/provgate/backend"
)

// Store is what the service needs from the durable store; *store.Store
// satisfies it.
//
// ClaimDeliveries returns up to n pending deliveries whose NextAt has come and
// whose lease has expired, leases them until now+lease, and counts the claim
// as an attempt: the returned Attempts includes this one (so a delivery that
// crashes its worker still runs out of attempts). EnqueueDelivery should be
// idempotent on (Plugin, Callback, Job); an ECONFLICT answer is taken as
// "already queued".
type Store interface {
	EnqueueDelivery(ctx context.Context, d backend.Delivery) (int64, error)
	ClaimDeliveries(ctx context.Context, n int, lease time.Duration) ([]backend.Delivery, error)
	FinishDelivery(ctx context.Context, id int64, state backend.DeliveryState, lastErr string, nextAt time.Time) error
	// RecordAttempts stores attempts in one transaction; At defaults to now.
	RecordAttempts(ctx context.Context, as []backend.CallbackAttempt) error
	ListAttempts(ctx context.Context, q backend.AttemptQuery) ([]backend.CallbackAttempt, error)
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
