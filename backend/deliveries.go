package backend

import "time"

// DeliveryState is where a durable callback delivery stands.
type DeliveryState string

// Delivery states.
const (
	DeliveryPending DeliveryState = "pending"
	DeliveryDone    DeliveryState = "done"
	DeliveryFailed  DeliveryState = "failed"
)

// Delivery is one durable callback delivery: the callback plugin's jobfail
// queue (docs/design.md §12.9), kept by the store. A claimed delivery is
// leased: nobody else claims it until LeaseUntil passes or it is finished.
type Delivery struct {
	ID                   int64
	Plugin, Callback     string
	Machine, Job         string
	Payload              []byte
	Attempts             int
	State                DeliveryState
	LastError            string
	NextAt               time.Time
	LeaseUntil           time.Time
	CreatedAt, UpdatedAt time.Time
}

// AttemptSource says what made a callback attempt.
type AttemptSource string

// Sources of attempts.
const (
	SourceAction  AttemptSource = "action"
	SourceJobFail AttemptSource = "jobfail"
)

// CallbackAttempt records one try of a callback, for operators.
type CallbackAttempt struct {
	ID                        int64
	Plugin, Callback, Machine string
	Source                    AttemptSource
	Attempt                   int
	Status                    int // 0 when no response arrived
	DurationMs                int64
	Error                     string // secrets redacted
	At                        time.Time
}

// AttemptQuery selects recorded attempts, newest first (by At, then ID).
type AttemptQuery struct {
	Plugin, Machine string // filters, when not empty
	Limit           int    // <= 0: no limit
	// A non-zero AfterID continues a listing: only the attempts listed
	// after the one with AfterAt and AfterID are returned, so pages neither
	// repeat nor skip rows while new attempts are recorded.
	AfterAt time.Time
	AfterID int64
}
