package main

// limits explains, per figure, what limits it when it misses its target.
// The report includes a note only for figures not met in that run. The
// notes come from reading the request path (guard → authn → claims →
// decision → handler), the micro-benchmarks of the packages involved and
// query plans; revisit them when that code changes.
var limits = map[string]string{
	"1": "Both legs share TLS, Fiber, the access log and the store read; the Bearer leg adds the guard. " +
		"Its largest part is token verification (gateway/auth bearer → tokenKey): jwt/v5 parsing and " +
		"reflection-based JSON decoding of the claims plus an HKDF key derivation from the three secrets on " +
		"every request, about 30 µs in BenchmarkAuthenticateBearer against 5 µs for a cached Basic check; " +
		"then claims.Derive (query parsing), the JSON encoding and SHA-256 of the policy input for the " +
		"decision cache key (policies/opa Engine.Decide) and a cache hit. A verified-token cache keyed by " +
		"the token's hash and the secrets' revision would remove most of it; that Basic with a warm cache " +
		"outruns Bearer in the same run (figure 2a above 1) points at the same place. The load generator shares the " +
		"2 CPUs, so round-to-round spread is large; see the per-round values.",
	"2a": "Basic with a warm cache is a user lookup (in memory), an HMAC of user, password and hash, and an " +
		"LRU lookup: cheaper than Bearer verification, so a miss points at cache misses (an entry older " +
		"than the 5-minute TTL, or evicted) rather than at the cache itself; failed requests appear in the raw table.",
	"2b": "With one client IP the failed-login limit answers almost every wrong password with a 429 before " +
		"scrypt (see the refusal counts under Setup), so scrypt is not what limits this figure. What limits it " +
		"is that a refusal still costs a full request (TLS, Fiber, user lookup, limiter, JSON error, access " +
		"log) and the server answers it at once: in a closed loop, 16 attacker clients then get about two " +
		"thirds of the CPU and the 8 Bearer clients the rest. Slowing refused logins down without using CPU " +
		"(delay the 429 by its Retry-After, or close the connection) would bound what attackers take.",
	"3": "Allocation counts are exact and load-independent (raw table below): an uncached decision " +
		"allocates several times what the trivial policy does, whose cost is the input conversion " +
		"(ast.InterfaceToValue) and result reading that both share. The difference is OPA's topdown " +
		"interpreter evaluating the claim rules (policies/claims.rego, grants.rego): a CPU profile of " +
		"BenchmarkDecide is dominated by built-ins called per required claim and role claim (count, " +
		"array.concat, startswith, split, comparisons). Precomputing more of each role's claims in " +
		"policies.NewData (split actions, parsed paths, claims indexed by scope), or moving claim " +
		"containment into one Go built-in, would cut the work per decision; the HTTP path already avoids " +
		"it for repeated requests through the decision cache (a few µs per hit, cached rows of the raw table).",
	"3 flatness": "Allocations per decision are identical for 10 and 10,000 roles and tenants, so the " +
		"evaluation does not walk the data set; ns/op differences between sizes swing both ways from round " +
		"to round with the machine's load (see the raw table), which is noise, not growth.",
	"4": "The restricted list runs the same SQL plus \"key\" IN (the tenant's visible keys, passed as one JSON " +
		"array and expanded with json_each, backend/store/query.go visible); the extra cost is that and the " +
		"list decision producing those keys (policies/tenancy.rego keys()) and passing them through " +
		"the guard (copied into access.Visible) and the store's query builder. Pushing a tenant id into SQL " +
		"instead of its key list would make the cost independent of the tenant's size.",
	"5a": "Allocation on PostgreSQL is CPU-bound in the database, not waiting on it: ClaimForUpdate " +
		"(backend/store/query.go) selects every Free machine of the pool and sorts them by random() to take " +
		"one, carrying each row's whole JSONB document through the sort. With 3,000 machines EXPLAIN ANALYZE " +
		"shows about 8 ms for that statement alone (2 ms scan, 6 ms sort of 2.8 MB), so one caller gets " +
		"about 50 allocations/s and 8 callers only add what the 2 CPUs have left. Sorting keys only (or " +
		"starting at a random key and taking the next unlocked rows by index) would make the claim " +
		"independent of pool size and let concurrency scale on lock waits instead of CPU.",
	"5b": "Duplicates or allocations missing from the store mean two callers got the same machine: the " +
		"claim (ClaimForUpdate, FOR UPDATE SKIP LOCKED) or its conditional update is broken.",
	"6": "callbackDo is a full gateway request (TLS, Bearer verification, policy) plus the action: machine " +
		"and plugin reads, the machine's aggregated params, template rendering of URL and body, the " +
		"outbound POST, and a synchronous insert of the attempt record (backend/callback send.go attempt → " +
		"RecordAttempt), which on SQLite serialises all callers on the single writer. The direct leg is only " +
		"the last of these, a plain-HTTP loopback POST, so even an authorized GET (figure 1) costs several " +
		"times a direct call; a ratio of 1.2 is out of reach for any call that goes through the gateway. " +
		"Within the action, the callback transport is a clone of http.DefaultTransport, which keeps only 2 " +
		"idle connections per host: with 8 concurrent callbackDo calls many outbound requests open a new " +
		"TCP connection (compare the receiver's connection count under Setup with the callbackDo requests). Raising MaxIdleConnsPerHost and " +
		"recording attempts asynchronously (as deliveries already are) are the changes this figure points at.",
}
