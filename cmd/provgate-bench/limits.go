package main

// limits explains, per figure, what limits it when it misses its target.
// The report includes a note only for figures not met in that run. The
// notes come from reading the request path (guard → authn → claims →
// decision → handler), the micro-benchmarks of the packages involved and
// query plans; revisit them when that code changes.
var limits = map[string]string{
	"1": "Both legs share TLS, Fiber, the access log and the store read; the Bearer leg adds the guard: " +
		"the request's claims (claims.Derive), a decision-cache hit (JSON encoding and SHA-256 of the policy " +
		"input) and, for a token not seen since the last change to users, roles, tenants or Secrets, the " +
		"token verification (jwt/v5 parsing plus an HKDF key derivation, about 30 µs); verified user tokens " +
		"are cached (cmd/provgate authenticator), so a steady client pays it once. The load generator " +
		"shares the 2 CPUs, so round-to-round spread is large; see the per-round values.",
	"2a": "Basic with a warm cache is a user lookup (in memory), an HMAC of user, password and hash, and an " +
		"LRU lookup: cheaper than Bearer verification, so a miss points at cache misses (an entry older " +
		"than the 5-minute TTL, or evicted) rather than at the cache itself; failed requests appear in the raw table.",
	"2b": "With one client IP the failed-login limit answers almost every wrong password with a 429 before " +
		"scrypt (see the refusal counts under Setup), and each 429 is answered after a one-second tarpit " +
		"(gateway guard), so a flood costs sleeping goroutines rather than CPU. A miss here would point at " +
		"the 403 path (wrong passwords under the limit run scrypt, one at a time: --scrypt-concurrency).",
	"7k": "The peak of this server is the wrong-Basic leg of 2b: each scrypt run holds 32 MiB until the next " +
		"collection, which lets the heap grow to twice what it found live. One slot runs whatever the cores " +
		"(--scrypt-concurrency, docs/design.md §15.8); a miss points at something else sized by GOMAXPROCS " +
		"(a pool, cache or worker count) or at the collector's headroom, which --memory-limit bounds.",
	"3": "Allocation counts are exact and load-independent (raw table below); the trivial policy's cost is " +
		"the input conversion and result reading that both share. Roles are already indexed in Go " +
		"(policies.NewData: scope → action key → specifics) and each required claim carries its fallback " +
		"keys, so containment is a few lookups per role of the principal; what remains is OPA's topdown " +
		"interpreter overhead per rule and per stored-data read (about 26 allocations per rule evaluated, " +
		"45 per data read): the tenant visibility check, the license gate and the reasons/visible rules. " +
		"Moving containment into one Go built-in would cut it further at the cost of the policy being " +
		"readable Rego; the HTTP path avoids it for repeated requests through the decision cache (a few µs " +
		"per hit, cached rows of the raw table).",
	"3 flatness": "Allocations per decision are identical for 10 and 10,000 roles and tenants, so the " +
		"evaluation does not walk the data set; ns/op differences between sizes swing both ways from round " +
		"to round with the machine's load (see the raw table), which is noise, not growth.",
	"4": "A restricted list without filters reads its page from the first sorted visible keys and keeps its " +
		"total per visible set (backend/store/visible.go); on SQLite a page the read cache holds whole is " +
		"answered from it. What remains is the first list after a write to one of the tenant's keys, which " +
		"counts the visible keys again (about 1 µs per key in the pure-Go SQLite driver).",
	"5a": "On 2 CPUs a single caller already keeps about one core busy (TLS, the gateway, the claim and " +
		"the writes in PostgreSQL), so 8 callers can at best add what the second core and lock waits " +
		"leave. The claim (ClaimForUpdate, backend/store/query.go) walks the pool's keys from a random " +
		"pivot with FOR UPDATE SKIP LOCKED, so callers rarely meet on a row; the relay's notices are sent " +
		"after the commit by one writer (backend/store/notify.go), since PostgreSQL serializes the commits " +
		"of transactions that issue a NOTIFY. What 8 callers still share is the commit's WAL flush and the " +
		"2 CPUs, with the load generator and PostgreSQL on them.",
	"5b": "Duplicates or allocations missing from the store mean two callers got the same machine: the " +
		"claim (ClaimForUpdate, FOR UPDATE SKIP LOCKED) or its conditional update is broken.",
	"6": "callbackDo is a full gateway request (TLS, Bearer, policy) plus the action: the machine and " +
		"plugin come from the read cache (docs/design.md §14.6), the plugin's opened params are kept per " +
		"revision, the aggregated params read profiles, stage and schema defaults through the same cache, " +
		"and a Url without template actions is used as it is; the attempt record is written off the request " +
		"path, batched for 50 ms (backend/callback attemptlog.go). What remains is the outbound POST through " +
		"net/http (its own goroutines and a kept-alive connection), the JSON encoding of the machine as the " +
		"body, the access log line and the batched inserts, which on SQLite take the single writer " +
		"connection. The direct leg is only the outbound POST on a kept-alive loopback connection.",
	"8d": "A write never waits for its subscribers: after the commit it makes one non-blocking channel send " +
		"per socket (eventbus.Bus). An idle socket sends the event at once; a busy one takes the events " +
		"published since its last write at the hub's next flush tick (--event-flush, 10 ms, the same ticks " +
		"for all sockets), authenticates its caller once, decides each event through the decision cache and " +
		"writes their frames (encoded once, shared) with one TLS write (docs/design.md §13.2). What the " +
		"ratio measures is that burst of work, once per tick, competing for the same 2 CPUs as the write: " +
		"per socket a wake-up, an authentication, a decision per event and a TLS write, plus the load " +
		"generator's 100 TLS clients decrypting and decoding them on the same cores. A write that meets a " +
		"burst waits for it, so the mean and p99 latencies (and the legs' req/s) suffer more than the p50.",
	"9 writes": "A write of a user, role or tenant reloads only what it changed (docs/design.md §14.4): the " +
		"change log names the object, Sync.Apply re-reads it and patches its part of the OPA data in one " +
		"store transaction. OPA's in-memory store rehashes a whole object when one of its keys is replaced " +
		"(ast object insert), so machine_tenants is split into 256 shards by the SHA-256 of the machine key " +
		"(policies.MachineShard): a tenant write listing a machine another tenant lists rewrites one shard, " +
		"about 1/256 of the fleet's entries. user_tenant is one object (read by every user decision), so a " +
		"write moving a user already in another tenant still costs about 50 ns per user.",
	"9g": "The authorized GET is served from the read cache (on SQLite, the only writer, without reading " +
		"the database; docs/design.md §14.6), so what separates it from /healthz is the guard: " +
		"route and claims derivation, the token cache, a decision-cache hit (JSON encoding and SHA-256 of " +
		"the policy input), the access log line and the per-route metrics. /healthz skips all of them. " +
		"The load generator's TLS work shares the 2 CPUs and pulls both legs together.",
	"9h": "As for 4: the page comes from the first sorted visible keys (or the read cache on SQLite) and " +
		"the total is kept per visible set; the remaining cost is the first list after a write to one of the " +
		"tenant's keys, which counts them again.",
	"9o": "As for 9h, with 10,000 visible keys: per request the keys are still checked for order and " +
		"hashed once (backend/store/visible.go) to find their kept total.",
	"14a": "As for 9h, on PostgreSQL: the total is kept while the existence generation (obj_exist) does not move.",
	"14b": "As for 14a; the unrestricted list it is compared with counts the whole table per request.",
	"9i": "callbackDo minus the authorized GET of the same machine is still the whole action (see 6): the " +
		"outbound POST through net/http, the machine encoded as the body and the batched attempt record. " +
		"The direct leg is one POST on a kept-alive loopback connection (about 100 µs), so each millisecond " +
		"of that work is ten units of the ratio.",
	"9j": "Start-up reads every role and tenant into the policy data (one full load) and checks the schema; " +
		"it does not read machines or users.",
	"9k": "Resident memory holds the policy data (every role's compiled claims and index, every tenant's " +
		"member sets, user_tenant and machine_tenants) and the bounded caches (decisions, objects, tokens).",
	"9l": "The filter runs in SQL on the Pool expression index; the count uses the same index.",
	"9m": "Pool status reads the pool's machines through the Pool index and decodes them; it grows with the " +
		"pool, not with the fleet.",
	"12a": "Explain evaluates the decision and the trail (policies/explain.rego) in one query, keeps " +
		"rule and function values in a flat table (policies/opa vcache.go) and reads the trail from OPA's " +
		"terms without a JSON round trip. A request the decision allowed in its one pass " +
		"(authz.plainly_allowed, as the benchmark's is) has no trail built in Rego: the policy's " +
		"explanation answers the few values it is written from (the user's tenants, the self claims, the " +
		"[role, claim] pairs covering the wanted claim read from each role's index, the direct claims) and " +
		"the engine writes the trail from them; its license step (authz.licensed) is evaluated once per " +
		"license and reused. What remains above the decision is these lookups (a few per role of the " +
		"user; the benchmark's user holds two roles) and OPA's cost per expression evaluated: about 450 " +
		"allocations against the decision's 320. The benchmark's rounds swing with the machine's load: the interquartile " +
		"range shows how far.",
	"12b": "Who can groups the users that provably get the same answer (the same roles and tenant, a " +
		"policy that reads names only as the embedded one does, Engine.Questions) and decides each group " +
		"once, through the decision cache: the large fleet's 10,000 users form about 6,000 groups (each " +
		"of the 500 tenants' 10 users holds a different role). What remains is listing and decoding the " +
		"10,000 user records from SQLite, a group key per user and a cached decision per group: about " +
		"150 ms in process on an idle machine, more under the load other work puts on these 2 CPUs. " +
		"Decoding only the users' names and roles, or keeping them in memory, would cut the listing.",
	"12d": "An evaluation authenticates, parses the AuthZEN body, asks whether the caller may ask about " +
		"the subject and see the resource, reads both through the read cache and decides: cached " +
		"decisions and cached reads, against the GET's one of each.",
}
