package backend

// Record is one stored object as the services read it from storage: its
// key, its revision (bumped on every write, used for ETags and optimistic
// updates) and its JSON.
type Record struct {
	Key  string
	Rev  int64
	Data []byte
}
