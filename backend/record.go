package backend

import "context"

// Record is one stored object as the services read it from storage: its
// key, its revision (bumped on every write, used for ETags and optimistic
// updates) and its JSON.
type Record struct {
	Key  string
	Rev  int64
	Data []byte
}

// RecordStore reads and updates stored objects; backend/store satisfies it.
// Transactions travel in ctx: calls made with the ctx InTx hands to fn join
// that transaction. The services that use it name what else they need
// beside it.
type RecordStore interface {
	Get(ctx context.Context, prefix, key string) (Record, error)
	GetBy(ctx context.Context, prefix, index, value string) (Record, error)
	Update(ctx context.Context, prefix, key string, rev int64, data []byte) (Record, error)
	List(ctx context.Context, prefix string, q Query) (recs []Record, total, matched int, err error)
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}
