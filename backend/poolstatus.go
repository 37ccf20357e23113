package backend

// Pool status moves driven by a machine's workflow (docs/design.md §11.5). The
// objects service calls these when a machine's workflow completes or one of
// its jobs fails; pool operations (backend/pools) set the transitional
// statuses: Joining (add, remove), Building (allocate), Destroying
// (release). Leaving is never set by provgate's operations (the machine moves
// to the destination pool at once) but is honoured if found.

// PoolStatusOnComplete returns the status a machine reaches when its
// workflow completes while in status s (s itself when s is not transitional).
// A Hold status completes too: the operator fixed the failed task and the
// workflow ran to its end, so the transition it was holding is finished.
func PoolStatusOnComplete(s string) string {
	switch s {
	case PoolJoining, PoolHoldJoin, PoolDestroying, PoolHoldDestroy, PoolLeaving, PoolHoldLeave:
		return PoolFree
	case PoolBuilding, PoolHoldBuild:
		return PoolInUse
	}
	return s
}

// PoolStatusOnFailure returns the Hold status for a job failure in status s
// (s itself when s is not transitional: a failure in Free or InUse does not
// change pool membership).
func PoolStatusOnFailure(s string) string {
	switch s {
	case PoolJoining:
		return PoolHoldJoin
	case PoolBuilding:
		return PoolHoldBuild
	case PoolDestroying:
		return PoolHoldDestroy
	case PoolLeaving:
		return PoolHoldLeave
	}
	return s
}

// PoolVerb is a pool membership operation, named as in its route
// (POST /pools/<id>/<verb>) and in its claim (action:<verb>).
type PoolVerb string

// Pool verbs (docs/design.md §11.1).
const (
	PoolAdd      PoolVerb = "addMachines"
	PoolRemove   PoolVerb = "removeMachines"
	PoolAllocate PoolVerb = "allocateMachines"
	PoolRelease  PoolVerb = "releaseMachines"
)

// PoolVerbs are every pool verb.
var PoolVerbs = []PoolVerb{PoolAdd, PoolRemove, PoolAllocate, PoolRelease}

// Valid reports whether v is one of PoolVerbs.
func (v PoolVerb) Valid() bool {
	switch v {
	case PoolAdd, PoolRemove, PoolAllocate, PoolRelease:
		return true
	}
	return false
}

// PoolOptions carry what a pool verb takes besides the pool and the body.
type PoolOptions struct {
	// SourcePool is the ?source-pool= of addMachines ("" = the target pool's
	// ParentPool, else default). Ignored by the other verbs.
	SourcePool string
	// Force (?force=true) widens the statuses a verb accepts.
	Force bool
	// Visible, when non-nil, is the set of machine keys the caller's tenant
	// may see; other machines are never chosen and are "not found" by name.
	Visible []string
	// Principal is recorded in the published events.
	Principal string
}
