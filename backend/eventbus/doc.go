// Package eventbus carries the server's events: the in-process Bus that
// object changes, job state changes and events clients post are published
// on (docs/design.md §13.1), and the Relay that tells other replicas
// sharing one PostgreSQL database about them (docs/design.md §13.4). The
// events themselves, and the rule of which a client may post
// (backend.Catalog.CheckPosted), belong to the domain package.
package eventbus
