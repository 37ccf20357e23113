package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/provgate/provgate/backend/store"
	"github.com/provgate/provgate/backend/store/storetest"
)

// The replica tests run provgate as separate OS processes sharing one
// PostgreSQL schema, so that a SIGKILL is a real crash: no deferred
// cleanup, no graceful drain, connections cut by the kernel. The test
// binary itself is the server: started with PROVGATE_E2E_CHILD=1 it runs
// the command line it was given instead of the tests.

const childEnv = "PROVGATE_E2E_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		// Passwords at the test cost, as the in-process servers
		// (testScryptN); the process is the server's, signals and all.
		err := runWith(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, hooks{scryptN: testScryptN})
		stop()
		os.Exit(report(err, os.Stderr))
	}
	code := m.Run()
	removeShipped()
	os.Exit(code)
}

// replica is one provgate process.
type replica struct {
	*tserver
	Addr   string // 127.0.0.1:port
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is gone
}

// errPortTaken says the picked port was taken between pick and bind.
var errPortTaken = errors.New("port taken")

// startReplica runs a server process on dsn until the test ends.
func startReplica(t *testing.T, name, dsn string, extra ...string) *replica {
	t.Helper()
	dir := t.TempDir()
	for try := 1; ; try++ {
		r, err := tryStartReplica(t, name, dsn, dir, freePort(t), extra)
		if err == nil {
			return r
		}
		if !errors.Is(err, errPortTaken) || try == 5 {
			t.Fatalf("replica %s: %v", name, err)
		}
	}
}

// freePort returns a loopback port that was free a moment ago; the caller
// retries when another process took it in between.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tryStartReplica(t *testing.T, name, dsn, dir string, port int, extra []string) (*replica, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{"serve", "--data-dir", dir, "--listen", addr, "--database", dsn, "--database-conns", testDatabaseConns,
		"--shutdown-timeout", "5s", "--log-level", "warn"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", "PROVGATE_ADMIN_PASSWORD="+e2eAdminPassword)
	s := &tserver{t: t, Name: name, Base: "https://" + addr + "/api/v3", DSN: dsn, DataDir: dir,
		Stdout: &logBuffer{}, Stderr: &logBuffer{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test server
			MaxIdleConnsPerHost: 32,
		}}}
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{tserver: s, Addr: addr, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.exited) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", s.Base+"/info", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := s.client.Do(req.WithContext(ctx))
		cancel()
		if err == nil {
			res.Body.Close()
			break
		}
		select {
		case <-r.exited:
			if strings.Contains(s.Stderr.String(), "address already in use") {
				return nil, errPortTaken
			}
			return nil, fmt.Errorf("exited before answering: %s", s.Stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.kill()
			return nil, fmt.Errorf("no answer on %s within 60s: %s", addr, s.Stderr.String())
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica %s (%s) stderr:\n%s", name, addr, lastChars(s.Stderr.String(), 4000))
		}
		r.stop()
	})
	return r, nil
}

// on is the replica's client bound to t, so that a failing request fails t
// (a subtest) rather than the test that started the process.
func (r *replica) on(t testing.TB) *tserver {
	c := *r.tserver
	c.t = t
	return &c
}

// kill ends the process with SIGKILL and waits for it.
func (r *replica) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
}

// stop asks for a graceful stop, then kills after 10 s.
func (r *replica) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		r.kill()
	}
}

func lastChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// replicaLicense makes a key pair; sign issues rbac licenses under it.
func replicaLicense(t *testing.T) (pub string, sign func() string) {
	t.Helper()
	dir := t.TempDir()
	priv := filepath.Join(dir, "lic.key")
	pub = filepath.Join(dir, "lic.pub")
	none := func(string) string { return "" }
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"license", "keygen", "--private-key", priv, "--public-key", pub},
		none, &out, &errb); err != nil {
		t.Fatalf("keygen: %v %s", err, errb.String())
	}
	return pub, func() string {
		out.Reset()
		if err := run(context.Background(), []string{"license", "sign", "--private-key", priv, "--features", "rbac",
			"--owner", "tests", "--expires", time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)},
			none, &out, &errb); err != nil {
			t.Fatalf("sign: %v %s", err, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
}

// TestE2EReplicas runs three provgate processes on one fresh PostgreSQL
// schema and shows what several replicas guarantee (docs/design.md §11.3, §12.9; the
// README's Guarantees): a change made through one replica is enforced by
// the others on the very next request, concurrent pool allocations through
// all of them never hand out a machine twice, and a replica killed with
// SIGKILL in the middle of pool operations and jobfail deliveries leaves no
// machine half-changed and loses no delivery.
func TestE2EReplicas(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	if dsn == "" {
		t.Skip(storetest.EnvDSN + " not set")
	}
	pub, signLicense := replicaLicense(t)
	// A short lease lets a surviving replica take over the deliveries of
	// a killed one within seconds instead of the default ten minutes.
	common := append([]string{"--license-public-key", pub, "--callback-delivery-lease", "3s", "--callback-poll-interval", "100ms"}, receiverArgs...)
	start := time.Now()
	// A bootstraps the empty schema; B and C join it.
	reps := []*replica{startReplica(t, "A", dsn, common...)}
	reps = append(reps, startReplica(t, "B", dsn, common...), startReplica(t, "C", dsn, common...))
	t.Logf("3 replicas up in %s", time.Since(start).Round(time.Millisecond))

	t.Run("enforced_on_next_request", func(t *testing.T) { replicasEnforce(t, reps, signLicense) })
	t.Run("allocations_never_collide", func(t *testing.T) { replicasAllocate(t, reps) })
	t.Run("sigkill_mid_operations", func(t *testing.T) { replicasKill(t, reps, dsn) })
}

// replicasEnforce: every access-control change made through A holds on B
// (and C) at once: no sleeps, the very next request.
func replicasEnforce(t *testing.T, reps []*replica, signLicense func() string) {
	a, b, c := reps[0], reps[1], reps[2]
	claim := func(scope, action string) map[string]string {
		return map[string]string{"scope": scope, "action": action, "specific": "*"}
	}
	patch := func(op, path string, v any) []map[string]any {
		return []map[string]any{{"op": op, "path": path, "value": v}}
	}

	t.Run("license", func(t *testing.T) {
		role := map[string]any{"Name": "x-viewer", "Claims": []any{claim("machines", "get,list")}}
		b.on(t).Must(403, "POST", "/roles", role, admin())
		a.on(t).Must(200, "PUT", "/license", map[string]any{"License": signLicense()}, admin())
		b.on(t).Must(201, "POST", "/roles", role, admin())
	})

	b.on(t).AddUser("x-op", "x-op-pw", "x-viewer")
	tok := b.on(t).Token("x-op", basic("x-op", "x-op-pw"), "")

	t.Run("role", func(t *testing.T) {
		B, C := b.on(t), c.on(t)
		B.Must(403, "GET", "/users", nil, bearer(tok))
		a.on(t).Must(200, "PATCH", "/roles/x-viewer", patch("add", "/Claims/-", claim("users", "list")), admin())
		B.Must(200, "GET", "/users", nil, bearer(tok))
		C.Must(200, "GET", "/users", nil, bearer(tok))
		a.on(t).Must(200, "PATCH", "/roles/x-viewer", []map[string]any{{"op": "remove", "path": "/Claims/1"}}, admin())
		B.Must(403, "GET", "/users", nil, bearer(tok))
		C.Must(403, "GET", "/users", nil, bearer(tok))
	})

	t.Run("tenant", func(t *testing.T) {
		m1 := a.on(t).On(t).AddMachine("x-m1", nil)
		m2 := a.on(t).On(t).AddMachine("x-m2", nil)
		B := b.on(t)
		B.Must(200, "GET", "/machines/"+m1, nil, bearer(tok))
		a.on(t).Must(201, "POST", "/tenants", map[string]any{"Name": "x-t", "Users": []string{"x-op"},
			"Members": map[string][]string{"machines": {m2}}}, admin())
		B.Must(404, "GET", "/machines/"+m1, nil, bearer(tok))
		B.Must(200, "GET", "/machines/"+m2, nil, bearer(tok))
		a.on(t).Must(200, "PATCH", "/tenants/x-t", patch("replace", "/Members/machines", []string{m1}), admin())
		B.Must(200, "GET", "/machines/"+m1, nil, bearer(tok))
		B.Must(404, "GET", "/machines/"+m2, nil, bearer(tok))
	})

	t.Run("password", func(t *testing.T) {
		B := b.on(t)
		// B has verified (and may cache) the old password.
		B.Must(200, "GET", "/users/x-op", nil, basic("x-op", "x-op-pw"))
		B.Must(200, "GET", "/users/x-op", nil, bearer(tok))
		a.on(t).Must(200, "PUT", "/users/x-op/password", map[string]any{"Password": "x-op-pw2"}, admin())
		B.Must(403, "GET", "/users/x-op", nil, basic("x-op", "x-op-pw"))
		B.Must(403, "GET", "/users/x-op", nil, bearer(tok)) // a password change rotates the Secret
		B.Must(200, "GET", "/users/x-op", nil, basic("x-op", "x-op-pw2"))
	})

	t.Run("user_secret", func(t *testing.T) {
		B := b.on(t)
		tok2 := B.Token("x-op", basic("x-op", "x-op-pw2"), "")
		B.Must(200, "GET", "/users/x-op", nil, bearer(tok2))
		a.on(t).Must(200, "POST", "/users/x-op/secret", nil, admin())
		B.Must(403, "GET", "/users/x-op", nil, bearer(tok2))
	})

	t.Run("system_secret", func(t *testing.T) {
		B, C := b.on(t), c.on(t)
		atok := B.Token("rocketskates", admin(), "")
		utok := C.Token("x-op", basic("x-op", "x-op-pw2"), "")
		B.Must(200, "GET", "/users", nil, bearer(atok))
		C.Must(200, "GET", "/users/x-op", nil, bearer(utok))
		a.on(t).Must(200, "POST", "/system/actions/rotateSecret", nil, admin())
		B.Must(403, "GET", "/users", nil, bearer(atok))
		C.Must(403, "GET", "/users", nil, bearer(atok))
		B.Must(403, "GET", "/users/x-op", nil, bearer(utok))
		C.Must(403, "GET", "/users/x-op", nil, bearer(utok))
		// New tokens work everywhere.
		B.Must(200, "GET", "/users", nil, bearer(C.Token("rocketskates", admin(), "")))
	})
}

// poolCall posts a pool operation from any goroutine: the status, the
// machines of a 200 reply, and a transport error.
func poolCall(s *tserver, path string, body any) (int, []poolResult, error) {
	b, _ := json.Marshal(body)
	sr, err := s.Send("POST", path, string(b), admin())
	st, rb := sr.Status, sr.Body
	if err != nil || st != 200 {
		if err == nil && st >= 500 {
			err = fmt.Errorf("%s: %d %s", path, st, rb)
		}
		return st, nil, err
	}
	var pr []poolResult
	if err := json.Unmarshal(rb, &pr); err != nil {
		return st, nil, fmt.Errorf("%s: decode %q: %w", path, rb, err)
	}
	return st, pr, nil
}

// freeIn counts the Free machines of a pool.
func freeIn(s *tserver, pool string) (int, error) {
	sr, err := s.Send("GET", "/pools/"+pool+"/status", "", admin())
	st, b := sr.Status, sr.Body
	if err != nil {
		return 0, err
	}
	if st != 200 {
		return 0, fmt.Errorf("status of %s: %d %s", pool, st, b)
	}
	var m map[string][]poolResult
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, err
	}
	return len(m["Free"]), nil
}

// createMachines makes n machines name-0..n-1 with fields, spread over the
// replicas, and returns their UUIDs by name.
func createMachines(t *testing.T, reps []*replica, prefix string, n int, fields map[string]any) map[string]string {
	t.Helper()
	var mu sync.Mutex
	out := map[string]string{}
	var errs []string
	var wg sync.WaitGroup
	const workers = 12
	for w := 0; w < workers; w++ {
		s := reps[w%len(reps)].tserver
		wg.Go(func() {
			for i := w; i < n; i += workers {
				body := map[string]any{"Name": fmt.Sprintf("%s-%03d", prefix, i)}
				for k, v := range fields {
					body[k] = v
				}
				b, _ := json.Marshal(body)
				sr, err := s.Send("POST", "/machines", string(b), admin())
				st, rb := sr.Status, sr.Body
				var m struct{ Name, Uuid string }
				if err == nil && st == 201 {
					err = json.Unmarshal(rb, &m)
				}
				mu.Lock()
				if err != nil || st != 201 || m.Uuid == "" {
					errs = append(errs, fmt.Sprintf("create %s: %d %s %v", body["Name"], st, rb, err))
				} else {
					out[m.Name] = m.Uuid
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d machines not created: %s", len(errs), strings.Join(errs[:min(len(errs), 5)], "; "))
	}
	return out
}

// poolMachines lists the machines of a pool through s.
func poolMachines(t testing.TB, s *tserver, pool string) []e2eMachine {
	t.Helper()
	var ms []e2eMachine
	s.Must(200, "GET", "/machines?Pool="+pool, nil, admin()).JSON(t, &ms)
	for _, m := range ms {
		if m.Pool != pool {
			t.Fatalf("listing pool %s returned %s in pool %q", pool, m.Name, m.Pool)
		}
	}
	return ms
}

// replicasAllocate: 3 replicas x 8 goroutines allocate from one pool of
// 300 machines until it is empty; every machine is handed out exactly once.
func replicasAllocate(t *testing.T, reps []*replica) {
	const (
		pool       = "rb"
		nMachines  = 300
		perReplica = 8
	)
	A := reps[0].on(t)
	A.Must(201, "POST", "/pools", map[string]any{"Id": pool}, admin())
	uuids := createMachines(t, reps, "rb", nMachines, map[string]any{"Pool": pool})
	if len(uuids) != nMachines {
		t.Fatalf("%d machines created, want %d", len(uuids), nMachines)
	}

	var (
		mu        sync.Mutex
		got       = map[string][]string{} // machine -> the workers that were handed it
		byReplica = map[string]int{}
		problems  []string
		requests  atomic.Int64
		refused   atomic.Int64
	)
	deadline := time.Now().Add(45 * time.Second)
	var wg sync.WaitGroup
	for _, r := range reps {
		for g := 0; g < perReplica; g++ {
			s := r.tserver
			who := fmt.Sprintf("%s/%d", s.Name, g)
			count := 1 + g%2 // half ask for one machine, half for two (minimum 1)
			wg.Go(func() {
				for i := 0; i < 2*nMachines && time.Now().Before(deadline); i++ {
					requests.Add(1)
					st, pr, err := poolCall(s, "/pools/"+pool+"/allocateMachines", drpcliBody(count, 1, "", "", nil))
					if err != nil {
						mu.Lock()
						problems = append(problems, who+": "+err.Error())
						mu.Unlock()
						return
					}
					if st == 409 {
						// Nothing was free for this caller: the pool is empty, or
						// every remaining machine was locked by another caller.
						refused.Add(1)
						n, err := freeIn(s, pool)
						if err != nil || n == 0 {
							return
						}
						continue
					}
					if st != 200 {
						mu.Lock()
						problems = append(problems, fmt.Sprintf("%s: status %d", who, st))
						mu.Unlock()
						return
					}
					mu.Lock()
					for _, m := range pr {
						got[m.Uuid] = append(got[m.Uuid], who)
						byReplica[s.Name]++
						if !m.Allocated || m.Status != "InUse" {
							problems = append(problems, fmt.Sprintf("%s: allocated %+v", who, m))
						}
					}
					if len(pr) == 0 || len(pr) > count {
						problems = append(problems, fmt.Sprintf("%s: %d machines for count %d", who, len(pr), count))
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s", len(problems), strings.Join(problems[:min(len(problems), 5)], "; "))
	}
	collisions, total := 0, 0
	for u, whos := range got {
		total += len(whos)
		if len(whos) > 1 {
			collisions++
			t.Errorf("machine %s allocated %d times: %v", u, len(whos), whos)
		}
	}
	t.Logf("replicas=3 goroutines=%d requests=%d allocations=%d distinct=%d collisions=%d refused(409)=%d per-replica=%v",
		3*perReplica, requests.Load(), total, len(got), collisions, refused.Load(), byReplica)
	if len(got) != nMachines || total != nMachines {
		t.Fatalf("%d allocations of %d distinct machines, want %d of %d", total, len(got), nMachines, nMachines)
	}
	// The store agrees with what the callers were told.
	for _, r := range reps {
		s := r.on(t)
		var st map[string][]poolResult
		s.Must(200, "GET", "/pools/"+pool+"/status", nil, admin()).JSON(t, &st)
		if len(st) != 1 || len(st["InUse"]) != nMachines {
			t.Fatalf("status through %s: %d statuses, %d InUse, want only %d InUse", s.Name, len(st), len(st["InUse"]), nMachines)
		}
	}
	ms := poolMachines(t, A, pool)
	if len(ms) != nMachines {
		t.Fatalf("%d machines in pool %s, want %d", len(ms), pool, nMachines)
	}
	for _, m := range ms {
		if !m.PoolAllocated || m.PoolStatus != "InUse" || len(got[m.Uuid]) != 1 {
			t.Fatalf("machine %s: allocated %v status %s handed out %d times", m.Name, m.PoolAllocated, m.PoolStatus, len(got[m.Uuid]))
		}
	}
}

// replicasKill: pool operations run through all replicas and jobfail
// deliveries are in flight when one replica is killed with SIGKILL. Every
// machine ends either untouched or fully moved, and every delivery is
// made, exactly once, by a survivor.
func replicasKill(t *testing.T, reps []*replica, dsn string) {
	const (
		src, dst   = "rc-src", "rc-dst"
		nMachines  = 120
		perReplica = 6
		nJobs      = 12
		nLate      = 6 // jobs failed through the victim as it dies
	)
	A := reps[0].on(t)
	A.Must(201, "POST", "/pools", map[string]any{"Id": src}, admin())
	A.Must(201, "POST", "/pools", map[string]any{"Id": dst, "ParentPool": src}, admin())
	mkProfile(t, A, "rc-prof")
	mkProfile(t, A, "rc-alloc")
	createMachines(t, reps, "rc", nMachines, map[string]any{"Pool": src, "Params": map[string]any{"rc/orig": "initial"}})

	// The jobfail receiver. The callback Url names the replica that sends
	// (its ApiURL), so the receiver knows who holds which delivery. The
	// first replica to send becomes the victim: its requests hang until
	// it dies; every other request is answered 200 at once.
	rc := newReceiver(t)
	var (
		hmu    sync.Mutex
		victim string
		held   = map[string]string{} // delivery id -> job, requests the victim holds
	)
	rc.handle("/jobfail", func(w http.ResponseWriter, r *http.Request) bool {
		from := r.URL.Query().Get("from")
		hmu.Lock()
		if victim == "" {
			victim = from
		}
		hold := from == victim
		if hold {
			held[r.Header.Get("X-Provgate-Delivery")] = r.Header.Get("X-Provgate-Job")
		}
		hmu.Unlock()
		if hold {
			select {
			case <-r.Context().Done():
				return true
			case <-time.After(30 * time.Second):
				// Bounded: the test has failed long before.
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
		return false
	})
	mkPlugin(t, A, "rc-jobfail", map[string]any{
		"jobfail": map[string]any{"Url": rc.URL + "/jobfail?from={{.ApiURL}}"},
	}, nil)
	jobMachines := make([]string, nJobs)
	for i := range jobMachines {
		jobMachines[i] = jobMachine(t, reps[i%3].on(t), fmt.Sprintf("rc-job-%02d", i))
	}
	late := make([]string, nLate) // running jobs
	for i := range late {
		s := reps[i%3].on(t)
		u := jobMachine(t, s, fmt.Sprintf("rc-late-%02d", i))
		late[i] = nextTaskJob(t, s, u)["Uuid"].(string)
		setJobState(t, s, late[i], "running")
	}

	// Pool workers on every replica cycle the machines through add
	// (src -> dst), allocate, release and remove (dst -> src). Each
	// operation writes its unique id into the machines it changes and
	// keeps the params and profiles in step with the pool state, so that
	// a machine caught between two states is visible.
	verbs := []struct {
		name, path string
		body       func(op string) map[string]any
	}{
		{"add", "/pools/" + dst + "/addMachines?source-pool=" + src, func(op string) map[string]any {
			return map[string]any{"pool/count": 2, "pool/minimum": 1, "pool/add-parameters": map[string]any{"rc/moved": op},
				"pool/remove-parameters": []string{"rc/orig"}, "pool/add-profiles": []string{"rc-prof"}}
		}},
		{"allocate", "/pools/" + dst + "/allocateMachines", func(op string) map[string]any {
			return map[string]any{"pool/count": 1, "pool/minimum": 1, "pool/add-parameters": map[string]any{"rc/alloc": op},
				"pool/add-profiles": []string{"rc-alloc"}}
		}},
		{"release", "/pools/" + dst + "/releaseMachines", func(op string) map[string]any {
			return map[string]any{"pool/count": 1, "pool/minimum": 1, "pool/remove-parameters": []string{"rc/alloc"},
				"pool/remove-profiles": []string{"rc-alloc"}}
		}},
		{"remove", "/pools/" + dst + "/removeMachines", func(op string) map[string]any {
			return map[string]any{"pool/count": 2, "pool/minimum": 1, "pool/add-parameters": map[string]any{"rc/orig": op},
				"pool/remove-parameters": []string{"rc/moved"}, "pool/remove-profiles": []string{"rc-prof"}}
		}},
	}
	var (
		omu      sync.Mutex
		reported = map[string]map[string]bool{} // op -> machines its 200 reply listed
		unknown  = map[string]bool{}            // ops whose reply the kill cut off
		problems []string
		inflight = map[string]*atomic.Int64{}
		done     = map[string]*atomic.Int64{}
		cut      = map[string]*atomic.Int64{} // transport errors (expected only on the victim)
	)
	stop := make(chan struct{})
	deadline := time.Now().Add(40 * time.Second)
	for _, r := range reps {
		inflight[r.Addr], done[r.Addr], cut[r.Addr] = &atomic.Int64{}, &atomic.Int64{}, &atomic.Int64{}
	}
	var wg sync.WaitGroup
	for _, r := range reps {
		for g := 0; g < perReplica; g++ {
			s := r.tserver
			addr := r.Addr
			wg.Go(func() {
				for i := 0; i < 5000 && time.Now().Before(deadline); i++ {
					select {
					case <-stop:
						return
					default:
					}
					op := fmt.Sprintf("%s-%d-%d", s.Name, g, i)
					v := verbs[(g+i)%len(verbs)]
					inflight[addr].Add(1)
					st, pr, err := poolCall(s, v.path, v.body(op))
					inflight[addr].Add(-1)
					if err != nil {
						omu.Lock()
						if st == 0 { // the connection broke: the replica is gone
							cut[addr].Add(1)
							unknown[op] = true
						} else {
							problems = append(problems, op+": "+err.Error())
						}
						omu.Unlock()
						return
					}
					done[addr].Add(1)
					switch st {
					case 200:
						got := map[string]bool{}
						for _, m := range pr {
							got[m.Uuid] = true
						}
						omu.Lock()
						reported[op] = got
						omu.Unlock()
					case 409:
						// Nothing eligible right now; try again a moment later.
						time.Sleep(5 * time.Millisecond)
					default:
						omu.Lock()
						problems = append(problems, fmt.Sprintf("%s: %s status %d", op, v.name, st))
						omu.Unlock()
						return
					}
				}
			})
		}
	}
	stopWorkers := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopWorkers()

	// Fail the jobs while the pool operations run; each failure queues one
	// durable delivery, which the replicas' workers claim.
	// The jobs run first, then all fail at once, so that one worker round
	// claims many deliveries together.
	jobs := map[string]bool{}
	running := make([]string, len(jobMachines))
	for i, u := range jobMachines {
		s := reps[i%3].on(t)
		running[i] = nextTaskJob(t, s, u)["Uuid"].(string)
		setJobState(t, s, running[i], "running")
		jobs[running[i]] = true
	}
	var fwg sync.WaitGroup
	failErrs := make([]string, len(running))
	for i, j := range running {
		s := reps[i%3].tserver
		fwg.Go(func() {
			sr, err := s.Send("PATCH", "/jobs/"+j, `[{"op":"replace","path":"/State","value":"failed"}]`, admin())
			st, b := sr.Status, sr.Body
			if err != nil || st != 200 {
				failErrs[i] = fmt.Sprintf("failing job %s: %d %s %v", j, st, b, err)
			}
		})
	}
	fwg.Wait()
	if e := strings.Join(failErrs, ""); e != "" {
		t.Fatal(e)
	}
	// Wait until the victim holds deliveries and everything else is sent.
	var victimRep *replica
	waitUntil := time.Now().Add(15 * time.Second)
	for {
		hmu.Lock()
		v, nHeld := victim, len(held)
		hmu.Unlock()
		sent := 0
		for _, h := range rc.on("/jobfail") {
			if !h.Aborted {
				sent++
			}
		}
		if v != "" && nHeld > 0 && nHeld+sent >= nJobs {
			for _, r := range reps {
				if "https://"+r.Addr == v {
					victimRep = r
				}
			}
			if victimRep == nil {
				t.Fatalf("jobfail sent from %q, which is no replica", v)
			}
			break
		}
		if time.Now().After(waitUntil) {
			t.Fatalf("deliveries not all in flight within 15s: victim %q holds %d, %d sent", v, nHeld, sent)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Make sure the victim is busy with pool operations too.
	for i := 0; i < 200 && done[victimRep.Addr].Load() < 20; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	hmu.Lock()
	heldAtKill := len(held)
	hmu.Unlock()
	// The late jobs fail through the victim while it dies: a failure it
	// acknowledged must be delivered, one it did not commit must not.
	// They go out 25 ms apart and the kill follows the first
	// acknowledgement, so some land before it and some are cut.
	lateStatus := make([]int, nLate)
	acked := make(chan struct{}, nLate)
	var lwg sync.WaitGroup
	for i, j := range late {
		lwg.Go(func() {
			time.Sleep(time.Duration(i) * 25 * time.Millisecond)
			sr, _ := victimRep.tserver.Send("PATCH", "/jobs/"+j, `[{"op":"replace","path":"/State","value":"failed"}]`, admin())
			lateStatus[i] = sr.Status
			if lateStatus[i] == 200 {
				acked <- struct{}{}
			}
		})
	}
	select {
	case <-acked:
	case <-time.After(2 * time.Second):
	}
	inflightAtKill, doneAtKill := inflight[victimRep.Addr].Load(), done[victimRep.Addr].Load()
	victimRep.kill()
	killedAt := time.Now()
	lwg.Wait()
	t.Logf("SIGKILL %s (%s): %d pool operations in flight, %d done before; holding %d of %d jobfail deliveries; late job failures acknowledged %v",
		victimRep.Name, victimRep.Addr, inflightAtKill, doneAtKill, heldAtKill, nJobs, lateStatus)

	var survivors []*replica
	for _, r := range reps {
		if r != victimRep {
			survivors = append(survivors, r)
		}
	}
	// The survivors keep operating on the same pools for a moment: rows
	// the dead replica had locked must be free again.
	time.Sleep(time.Second)
	stopWorkers()
	if len(problems) > 0 {
		t.Fatalf("%d pool operation problems, first: %s", len(problems), strings.Join(problems[:min(len(problems), 5)], "; "))
	}
	for _, r := range survivors {
		if n := cut[r.Addr].Load(); n > 0 {
			t.Fatalf("%d requests to survivor %s failed in transport", n, r.Name)
		}
		if done[r.Addr].Load() == 0 {
			t.Fatalf("survivor %s completed no pool operation", r.Name)
		}
	}

	t.Run("no_half_applied_machine", func(t *testing.T) {
		S := survivors[0].on(t)
		all := append(poolMachines(t, S, src), poolMachines(t, S, dst)...)
		if len(all) != nMachines {
			t.Fatalf("%d machines in %s and %s, want %d", len(all), src, dst, nMachines)
		}
		byUUID := map[string]e2eMachine{}
		untouched, moved, allocated, half := 0, 0, 0, 0
		for _, m := range all {
			byUUID[m.Uuid] = m
			profiles := strings.Join(m.Profiles, ",")
			_, orig := m.Params["rc/orig"]
			_, hasMoved := m.Params["rc/moved"]
			_, hasAlloc := m.Params["rc/alloc"]
			ok := false
			switch {
			case m.Pool == src:
				ok = m.PoolStatus == "Free" && !m.PoolAllocated && orig && !hasMoved && !hasAlloc && profiles == ""
				untouched++
			case m.Pool == dst && !m.PoolAllocated:
				ok = m.PoolStatus == "Free" && !orig && hasMoved && !hasAlloc && profiles == "rc-prof"
				moved++
			default:
				ok = m.PoolStatus == "InUse" && !orig && hasMoved && hasAlloc && profiles == "rc-prof,rc-alloc"
				allocated++
			}
			if !ok {
				half++
				t.Errorf("half-applied machine %s: Pool %s PoolStatus %s PoolAllocated %v Profiles %v Params %v",
					m.Name, m.Pool, m.PoolStatus, m.PoolAllocated, m.Profiles, m.Params)
			}
		}
		// Every change a machine carries comes from an operation that
		// reported that machine in its 200 reply, or from one whose reply
		// the kill cut off: no operation changed a machine it did not
		// report.
		omu.Lock()
		defer omu.Unlock()
		for _, m := range all {
			for _, key := range []string{"rc/orig", "rc/moved", "rc/alloc"} {
				op, ok := m.Params[key].(string)
				if !ok || (key == "rc/orig" && op == "initial") {
					continue
				}
				if !reported[op][m.Uuid] && !unknown[op] {
					t.Errorf("machine %s carries %s=%s, but that operation did not report it", m.Name, key, op)
				}
			}
		}
		succeeded := 0
		for _, ms := range reported {
			succeeded += len(ms)
		}
		t.Logf("machines=%d in-src=%d in-dst-free=%d in-dst-allocated=%d half-applied=%d; operations: %d succeeded moving %d machines, %d cut by the kill",
			len(all), untouched, moved, allocated, half, len(reported), succeeded, len(unknown))
		if moved+allocated == 0 {
			t.Fatal("no machine was moved: the operations did not run")
		}
	})

	t.Run("no_delivery_lost", func(t *testing.T) {
		// A late job is failed when the victim committed the change; its
		// delivery was queued in that same transaction.
		S := survivors[0].on(t)
		lateFailed := 0
		for i, j := range late {
			var job struct{ State string }
			S.Must(200, "GET", "/jobs/"+j, nil, admin()).JSON(t, &job)
			switch {
			case job.State == "failed":
				lateFailed++
				jobs[j] = true
			case lateStatus[i] == 200:
				t.Fatalf("late job %s: failure acknowledged, but the job is %s", j, job.State)
			default:
				jobs[j] = false
			}
		}
		expected := nJobs + lateFailed
		delivered := func() map[string][]hit {
			out := map[string][]hit{}
			for _, h := range rc.on("/jobfail") {
				if !h.Aborted {
					out[h.Header.Get("X-Provgate-Delivery")] = append(out[h.Header.Get("X-Provgate-Delivery")], h)
				}
			}
			return out
		}
		// The victim's deliveries come back when their lease (3 s) ends.
		until := time.Now().Add(20 * time.Second)
		for len(delivered()) < expected {
			if time.Now().After(until) {
				t.Fatalf("%d of %d deliveries made within 20s of the kill", len(delivered()), expected)
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(killedAt)
		// One more worker round on both survivors: nothing is sent again.
		for _, r := range survivors {
			r.on(t).WorkerRounds(t)
		}
		got := delivered()
		perJob := map[string]int{}
		for id, hs := range got {
			if len(hs) != 1 {
				t.Errorf("delivery %s made %d times", id, len(hs))
			}
			for _, h := range hs {
				perJob[h.Header.Get("X-Provgate-Job")]++
				if q, _ := url.ParseQuery(h.Query); q.Get("from") == "https://"+victimRep.Addr {
					t.Errorf("delivery %s made by the killed replica", id)
				}
			}
		}
		for j, failed := range jobs {
			if want := map[bool]int{true: 1}[failed]; perJob[j] != want {
				t.Errorf("job %s (failed %v) delivered %d times, want %d", j, failed, perJob[j], want)
			}
		}
		aborted := 0
		hmu.Lock()
		defer hmu.Unlock()
		for _, h := range rc.on("/jobfail") {
			if h.Aborted {
				aborted++
				if _, ok := held[h.Header.Get("X-Provgate-Delivery")]; !ok {
					t.Errorf("delivery %s cut short, but the victim did not hold it", h.Header.Get("X-Provgate-Delivery"))
				}
			}
		}
		// The queue agrees: every delivery done, none pending or failed.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := store.Open(ctx, dsn, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ds, err := st.ListDeliveries(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]int{}
		retried := 0
		for _, d := range ds {
			states[string(d.State)]++
			if d.Attempts > 1 {
				retried++
			}
		}
		ids := make([]string, 0, len(got))
		for id := range got {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		t.Logf("deliveries expected=%d (%d before the kill, %d of %d late failures committed) delivered=%d (distinct ids %d) cut by the kill=%d taken over=%d in %s; queue states %v",
			expected, nJobs, lateFailed, nLate, len(perJob), len(ids), aborted, heldAtKill, took.Round(100*time.Millisecond), states)
		if len(ds) != expected || states["done"] != expected {
			t.Fatalf("queue holds %d deliveries in states %v, want %d done", len(ds), states, expected)
		}
		if retried < heldAtKill {
			t.Fatalf("%d deliveries were attempted more than once, but the victim held %d", retried, heldAtKill)
		}
	})
}
