package callback

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/provgate/provgate/backend"
)

func prefixes(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := ParsePrefixes(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDestinationsCheck: loopback, link-local (cloud metadata), unspecified,
// multicast and broadcast addresses are refused by default, in IPv4,
// IPv6 and IPv4-mapped IPv6 forms; other addresses, private ranges
// included, pass. Allow lets some refused ones through; Deny refuses more
// and wins over Allow.
func TestDestinationsCheck(t *testing.T) {
	var def Destinations
	for _, a := range []string{"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "169.254.169.254", "fe80::1",
		"fe80::1%eth0", "fd00:ec2::254", "0.0.0.0", "0.1.2.3", "::", "224.0.0.1", "239.255.255.250", "ff02::1", "255.255.255.255"} {
		err := def.Check(netip.MustParseAddr(a))
		if _, ok := refusedDestination(err); !ok || !strings.Contains(err.Error(), "--callback-allow") {
			t.Errorf("%s: %v, want refused naming --callback-allow", a, err)
		}
	}
	for _, a := range []string{"10.1.2.3", "192.168.0.10", "172.16.5.5", "8.8.8.8", "2001:db8::1", "fd12::1", "100.64.0.1"} {
		if err := def.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s refused: %v", a, err)
		}
	}

	d := Destinations{Allow: prefixes(t, "127.0.0.1/32, ::1"), Deny: prefixes(t, "10.0.0.0/8,127.0.0.1")}
	for a, want := range map[string]string{
		"::1":             "",
		"127.0.0.2":       "loopback",
		"127.0.0.1":       "--callback-deny 127.0.0.1/32",
		"::ffff:10.9.9.9": "--callback-deny 10.0.0.0/8",
		"10.200.0.1":      "--callback-deny 10.0.0.0/8",
		"11.0.0.1":        "",
	} {
		err := d.Check(netip.MustParseAddr(a))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s refused: %v", a, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want a refusal naming %q", a, err, want)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got := prefixes(t, " 127.0.0.1/32,10.0.0.1 ,,::1,192.168.1.7/24,::ffff:10.0.0.0/104")
	want := []string{"127.0.0.1/32", "10.0.0.1/32", "::1/128", "192.168.1.0/24", "10.0.0.0/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "1.2.3", "10.0.0.0/8/8"} {
		if _, err := ParsePrefixes(bad); err == nil || !strings.Contains(err.Error(), "CIDR") {
			t.Errorf("%q: %v, want an error", bad, err)
		}
	}
}

// listenOn starts a receiver on a given loopback address.
func listenOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestRefusedDestinations: through the real transport, a callback to the
// loopback receiver is refused at dial time when the operator did not
// allow it: the receiver gets nothing, one attempt records the refusal
// (not retried), and the reply is 409 naming it. A json-token auth's token
// request is refused the same way. A redirect from an allowed receiver to
// a refused address literal, or to a name that resolves to a refused
// address, is refused too.
func TestRefusedDestinations(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, func(o *Options) { o.Destinations = Destinations{} })
	p := plugin(map[string]any{"c": map[string]any{"Url": rc.URL + "/hook", "Retry": 3, "Delay": 0}}, nil)
	_, err := do(t, e, p, act("c"))
	if backend.ErrorCode(err) != backend.ECONFLICT || !strings.Contains(err.Error(), "destination 127.0.0.1 refused: a loopback address") {
		t.Fatalf("callback to loopback: %v", err)
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("the refused receiver got %d requests", n)
	}
	at := e.attempts()
	if len(at) != 1 || !strings.Contains(at[0].Error, "destination 127.0.0.1 refused") {
		t.Fatalf("attempts %+v, want one naming the refusal", at)
	}

	// A name is resolved and checked when dialed.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(rc.URL, "http://"))
	p = plugin(map[string]any{"c": map[string]any{"Url": "http://localhost:" + port + "/hook"}}, nil)
	if _, err := do(t, e, p, act("c")); !strings.Contains(errString(err), "refused: a loopback address") {
		t.Fatalf("callback to localhost: %v", err)
	}

	// A json-token auth's token request.
	ts, n := tokenServer(t, false)
	target := listenOn(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	e = newEnv(t, func(o *Options) { o.Destinations = Destinations{Allow: prefixes(t, "127.0.0.2")} })
	p = plugin(map[string]any{"c": map[string]any{"Url": target.URL, "Auth": "j"}},
		map[string]any{"j": map[string]any{"AuthType": "json-token", "Url": ts.URL, "TokenField": "access_token"}})
	if _, err := do(t, e, p, act("c")); !strings.Contains(errString(err), "token request destination 127.0.0.1 refused") {
		t.Fatalf("token request to loopback: %v", err)
	}
	if n.Load() != 0 {
		t.Fatalf("the refused token server got %d requests", n.Load())
	}

	// Redirects from an allowed receiver (127.0.0.2).
	hits := 0
	refusedRC := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { hits++ })
	_, rport, _ := net.SplitHostPort(strings.TrimPrefix(refusedRC.URL, "http://"))
	for _, to := range []string{refusedRC.URL + "/x", "http://localhost:" + rport + "/x", "http://169.254.169.254/latest/meta-data/"} {
		from := listenOn(t, "127.0.0.2", http.RedirectHandler(to, http.StatusFound))
		p = plugin(map[string]any{"c": map[string]any{"Url": from.URL}}, nil)
		_, err := do(t, e, p, act("c"))
		if !strings.Contains(errString(err), "refused") {
			t.Errorf("redirect to %s: %v, want refused", to, err)
		}
	}
	if hits != 0 {
		t.Fatalf("a redirect reached the refused receiver %d times", hits)
	}
	// Control: the allowed receiver itself works.
	p = plugin(map[string]any{"c": map[string]any{"Url": target.URL}}, nil)
	if _, err := do(t, e, p, act("c")); err != nil {
		t.Fatalf("allowed receiver: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
