package backend

// View is one object as a read without view options answers it: the
// sanitized object, its revision, its ETag and its JSON encoding (the
// reply body). A View may be shared with other readers: never modify it.
type View struct {
	Model Model
	Rev   int64
	ETag  string
	JSON  []byte
}
