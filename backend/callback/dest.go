package callback

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Destinations decides which addresses callbacks and token requests may
// connect to (docs/design.md §12.6). By default every address is allowed
// except loopback, link-local (where clouds serve instance metadata),
// unspecified, multicast and broadcast addresses: a plugin writer must not
// reach the server's own host or its cloud credentials through a callback.
// Deny adds refusals and wins over everything; Allow lets the operator
// reach some of the refused ones (a receiver on the same host).
//
// The address checked is the one being dialed, after name resolution, so a
// name that resolves differently later (DNS rebinding) or a redirect to
// another host is checked again when its connection is made.
type Destinations struct {
	Allow []netip.Prefix
	Deny  []netip.Prefix
}

// refused are the ranges refused unless allowed, with the reason named in
// the refusal.
var refused = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (cloud instance metadata)"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address (cloud instance metadata)"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud instance metadata address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "a broadcast address"},
}

// DestinationError is a connection refused by Destinations.
type DestinationError struct {
	Addr netip.Addr
	Why  string
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("destination %s refused: %s", e.Addr, e.Why)
}

// Check returns a *DestinationError when addr may not be dialed.
func (d Destinations) Check(addr netip.Addr) error {
	addr = addr.Unmap().WithZone("")
	for _, p := range d.Deny {
		if p.Contains(addr) {
			return &DestinationError{Addr: addr, Why: "denied by --callback-deny " + p.String()}
		}
	}
	for _, p := range d.Allow {
		if p.Contains(addr) {
			return nil
		}
	}
	for _, r := range refused {
		if r.prefix.Contains(addr) {
			return &DestinationError{Addr: addr, Why: r.why + "; allow it with --callback-allow"}
		}
	}
	return nil
}

// checkHost checks a URL host that is an address literal; names are
// checked when they are dialed.
func (d Destinations) checkHost(host string) error {
	addr, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return nil
	}
	return d.Check(addr)
}

// control is the net.Dialer Control of the callback transport: it runs for
// every address a connection is attempted to, after resolution.
func (d Destinations) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &DestinationError{Why: "not an IP address: " + address}
	}
	return d.Check(ap.Addr())
}

// guard makes t dial only what d allows. Environment proxies are not used:
// a proxy would dial the destination itself, out of reach of the check.
func (d Destinations) guard(t *http.Transport) {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: d.control}
	t.Proxy = nil
	t.DialContext = dialer.DialContext
	t.DialTLSContext = nil
}

// ParsePrefixes reads a comma-separated list of CIDR prefixes or single
// addresses ("127.0.0.1/32,10.1.2.3,::1"), as --callback-allow and
// --callback-deny take them. Empty entries are skipped.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR prefix or an IP address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR prefix or an IP address", f)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// refusedDestination returns the *DestinationError in err's chain.
func refusedDestination(err error) (*DestinationError, bool) {
	var de *DestinationError
	ok := errors.As(err, &de)
	return de, ok
}
