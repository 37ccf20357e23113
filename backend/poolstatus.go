package backend

// Pool status moves driven by a machine's workflow (reference §5.3). The
// objects service calls these when a machine's workflow completes or one of
// its jobs fails; pool operations set the transitional statuses.

// PoolStatusOnComplete returns the status a machine reaches when its
// workflow completes while in status s (s itself when s is not transitional).
func PoolStatusOnComplete(s string) string {
	switch s {
	case PoolJoining, PoolDestroying, PoolLeaving:
		return PoolFree
	case PoolBuilding:
		return PoolInUse
	}
	return s
}

// PoolStatusOnFailure returns the Hold status for a job failure in status s.
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
