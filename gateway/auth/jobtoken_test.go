package auth

import (
	"context"
	"testing"
	"time"

	"github.com/provgate/provgate/backend"
)

const job1 = "6f5c0000-0000-4000-8000-000000000001"

// TestJobToken: a job token is an operations token of the job's machine
// carrying the task's extra claims, valid while its job is created or
// running, bound to the machine's, the system's and a user grantor's
// Secrets, and never outliving its creator (docs/design.md §8.7).
func TestJobToken(t *testing.T) {
	ctx := context.Background()
	extra := []backend.Claim{{Scope: "profiles", Action: "get", Specific: "*"}}
	setup := func(t *testing.T) (*tokenWorld, *Principal) {
		w := newTokenWorld(t)
		w.s.jobs[job1] = [2]string{machine1, backend.JobCreated}
		p, err := w.auth(w.machineToken(t, machine1, MachineOperations))
		if err != nil {
			t.Fatal(err)
		}
		return w, p
	}
	t.Run("from the machine's token", func(t *testing.T) {
		w, creator := setup(t)
		tok, exp, err := w.a.IssueJobToken(ctx, creator, machine1, job1, extra, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !exp.Equal(creator.ExpiresAt) {
			t.Fatalf("expiry %v, want the creator's %v", exp, creator.ExpiresAt)
		}
		p, err := w.auth(tok)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != KindMachine || p.Name != machine1 || p.MachineToken != MachineOperations || p.Job != job1 ||
			len(p.Claims) != 1 || p.Claims[0] != extra[0] || p.Grantor != SystemGrantor {
			t.Fatalf("principal %+v", p)
		}
		// Running is still valid; any end kills it.
		for _, st := range []string{backend.JobRunning, backend.JobFinished, backend.JobFailed, backend.JobIncomplete} {
			w.s.set(func(f *fakeSecrets) { f.jobs[job1] = [2]string{machine1, st} })
			_, err := w.auth(tok)
			if st == backend.JobRunning && err != nil {
				t.Fatalf("running job: %v", err)
			}
			if st != backend.JobRunning {
				wantCode(t, err, backend.EFORBIDDEN)
			}
		}
	})
	t.Run("dies with its Secrets and its job", func(t *testing.T) {
		for name, change := range map[string]func(f *fakeSecrets){
			"machine Secret": func(f *fakeSecrets) { f.machines[machine1] = "rotated" },
			"system Secret":  func(f *fakeSecrets) { f.system = "rotated" },
			"job deleted":    func(f *fakeSecrets) { delete(f.jobs, job1) },
			"job moved":      func(f *fakeSecrets) { f.jobs[job1] = [2]string{machine2, backend.JobRunning} },
		} {
			t.Run(name, func(t *testing.T) {
				w, creator := setup(t)
				tok, _, err := w.a.IssueJobToken(ctx, creator, machine1, job1, extra, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				w.s.set(change)
				_, err = w.auth(tok)
				wantCode(t, err, backend.EFORBIDDEN)
			})
		}
	})
	t.Run("granted by a user", func(t *testing.T) {
		w, _ := setup(t)
		tok, exp, err := w.a.IssueJobToken(ctx, basicGrantor(w.admin), machine1, job1, extra, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !exp.Equal(w.clk.Now().Add(time.Hour)) {
			t.Fatalf("expiry %v", exp)
		}
		p, err := w.auth(tok)
		if err != nil || p.Grantor != "admin" {
			t.Fatalf("principal %+v, %v", p, err)
		}
		w.s.setUserSecret("admin", "rotated-admin")
		_, err = w.auth(tok)
		wantCode(t, err, backend.EFORBIDDEN)
	})
	t.Run("refused creators", func(t *testing.T) {
		w, creator := setup(t)
		other, err := w.auth(w.machineToken(t, machine2, MachineOperations))
		if err != nil {
			t.Fatal(err)
		}
		disc, err := w.auth(w.machineToken(t, "", MachineDiscovery))
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]*Principal{"another machine": other, "discovery": disc, "nobody": nil} {
			_, _, err := w.a.IssueJobToken(ctx, c, machine1, job1, extra, time.Hour)
			t.Run(name, func(t *testing.T) { wantCode(t, err, backend.EFORBIDDEN) })
		}
		w.clk.Add(2 * time.Hour) // the creator's token has expired
		_, _, err = w.a.IssueJobToken(ctx, creator, machine1, job1, extra, time.Hour)
		wantCode(t, err, backend.EFORBIDDEN)
	})
	t.Run("job claims only in job tokens", func(t *testing.T) {
		w, _ := setup(t)
		// A user or plain machine token carrying a job or claims is not
		// one of ours: the fields never verify outside a job token.
		for name, c := range map[string]*tokenClaims{
			"user with claims":    {Kind: KindUser, Grantor: "bob", Claims: extra},
			"user with a job":     {Kind: KindUser, Grantor: "bob", Job: job1},
			"machine with claims": {Kind: KindMachine, Grantor: SystemGrantor, MachineToken: MachineOperations, Claims: extra},
		} {
			t.Run(name, func(t *testing.T) {
				sub := "bob"
				in := keyInputs{kind: KindUser, user: w.bob.Secret, grantor: w.bob.Secret}
				if c.Kind == KindMachine {
					sub, in = machine1, keyInputs{kind: KindMachine, machine: "machine1-secret-1"}
				}
				in.system = w.s.system
				c.RegisteredClaims, _ = w.a.registered(sub, time.Hour)
				tok, err := w.a.sign(w.s.base, in, c)
				if err != nil {
					t.Fatal(err)
				}
				_, err = w.auth(tok)
				wantCode(t, err, backend.EFORBIDDEN)
			})
		}
	})
}
