package main

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// BenchmarkExplorer times the access explorer's answers through the
// running server, in process, so that -cpuprofile sees the server's side:
// an AuthZEN evaluation beside the authorized GET it is compared with in
// make bench (figure 12d), and who can over PROVGATE_BENCH_USERS users
// (default 1000; figure 12b uses 10,000 with the bench tool's fleet),
// holding PROVGATE_BENCH_ROLES roles (default 50) and, with
// PROVGATE_BENCH_TENANTS, that many tenants of 10 users each.
// Timings are for profiling; make bench reports the figures.
func BenchmarkExplorer(b *testing.B) {
	s := startE2E(b, dbCase{Name: "sqlite"}, licenseArgs(b)...)
	m := s.AddMachine("b-m1", nil)
	users := 1000
	if v, err := strconv.Atoi(os.Getenv("PROVGATE_BENCH_USERS")); err == nil && v > 0 {
		users = v
	}
	s.AddRole("b-reader", [3]string{"machines", "get,list", "*"})
	s.AddUser("b-u1", "b-u1-pw-1", "b-reader")
	nroles, tenants := 50, 0
	if v, err := strconv.Atoi(os.Getenv("PROVGATE_BENCH_ROLES")); err == nil && v > 0 {
		nroles = v
	}
	if v, err := strconv.Atoi(os.Getenv("PROVGATE_BENCH_TENANTS")); err == nil && v > 0 {
		tenants = v
	}
	roles := []map[string]any{}
	for i := range nroles {
		roles = append(roles, map[string]any{"Name": fmt.Sprintf("b-r%d", i), "Claims": []map[string]string{
			{"scope": "machines", "action": "get,list", "specific": "*"}, {"scope": "profiles", "action": "get", "specific": fmt.Sprintf("p-%d", i)}}})
	}
	s.Must(201, "POST", "/roles/import", roles, admin())
	batch := []map[string]any{}
	for i := range users {
		batch = append(batch, map[string]any{"Name": fmt.Sprintf("b-user-%d", i), "Roles": []string{fmt.Sprintf("b-r%d", i%nroles)}})
		if len(batch) == 500 || i == users-1 {
			s.Must(201, "POST", "/users/import", batch, admin())
			batch = batch[:0]
		}
	}
	// Tenant i holds users 10i..10i+9 and shows one other machine.
	for i := range tenants {
		var us []string
		for j := 10 * i; j < 10*i+10 && j < users; j++ {
			us = append(us, fmt.Sprintf("b-user-%d", j))
		}
		s.Must(201, "POST", "/tenants", map[string]any{"Name": fmt.Sprintf("b-t%d", i), "Users": us,
			"Members": map[string][]string{"machines": {}}}, admin())
	}
	eval := map[string]any{"subject": map[string]any{"type": "user", "id": "b-u1"}, "action": map[string]any{"name": "get"},
		"resource": map[string]any{"type": "machines", "id": m}}
	root := s.Base[:len(s.Base)-len("/api/v3")]
	authz := admin()
	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			f()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f()
			}
		})
	}
	run("authzen-evaluation", func() {
		if r, err := s.SendURL("POST", root+"/access/v1/evaluation", eval, authz); err != nil || r.Status != 200 {
			b.Fatalf("%v %v", r, err)
		}
	})
	run("authorized-get", func() {
		if r, err := s.SendURL("GET", s.Base+"/machines/"+m, nil, authz); err != nil || r.Status != 200 {
			b.Fatalf("%v %v", r, err)
		}
	})
	run("who-can", func() {
		if r, err := s.SendURL("GET", s.Base+"/access/who?scope=machines&action=get&key="+m, nil, authz); err != nil || r.Status != 200 {
			b.Fatalf("%v %v", r, err)
		}
	})
}
