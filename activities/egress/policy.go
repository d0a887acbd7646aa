package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrBlockedAddress is wrapped by every dial-time refusal so the delivery engine can record the
// attempt as "blocked" rather than as a network failure the receiver's owner could fix by retrying.
var ErrBlockedAddress = errors.New("blocked address")

// AddressPolicy decides which receiver addresses webhookd may connect to. Customers choose the
// URLs webhookd posts to, so without it anyone with an API key could make webhookd reach the cloud
// metadata service, the database or any other internal endpoint (SSRF). The zero value is the
// production policy; the switches exist only so development and tests can target local receivers.
type AddressPolicy struct {
	AllowPrivate bool // development switch WEBHOOKD_ALLOW_PRIVATE_TARGETS: permits every address
	AllowHTTP    bool // development switch WEBHOOKD_ALLOW_HTTP_TARGETS: permits the http scheme
}

// URLError says why a receiver URL was refused. It is a distinct type so the API can tell a
// customer mistake (shown to the client as a validation failure) from an internal error; Reason is
// a short human sentence that is safe to show to API clients, e.g. "url must use https" or
// "url host resolves to a private address (10.0.0.5)".
type URLError struct{ Reason string }

// Error returns the Reason alone because it is already a complete sentence meant for clients.
func (e *URLError) Error() string { return e.Reason }

func refuse(format string, args ...any) error {
	return &URLError{Reason: fmt.Sprintf(format, args...)}
}

// maxURLLength bounds stored receiver URLs: longer ones are almost certainly abuse and would bloat
// every delivery row and log line that carries them.
const maxURLLength = 2048

// resolveTimeout keeps a slow or hostile DNS server from holding an API request open; giving up is
// safe because the dial-time check is the authoritative one.
const resolveTimeout = 2 * time.Second

type blockedRange struct {
	prefix netip.Prefix
	reason string
}

// blockedV4 lists the IPv4 ranges that are not public unicast. More specific entries come first so
// that the reported class is the most precise one.
var blockedV4 = []blockedRange{
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified"},
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "cgnat"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"}, // includes 169.254.169.254, cloud metadata
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"}, // IETF protocol assignments
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// blockedV6 lists the IPv6 ranges that are not public unicast and carry no IPv4 address worth
// extracting. The ranges that do embed IPv4 are handled in BlockedReason.
var blockedV6 = []blockedRange{
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
	{netip.MustParsePrefix("2001:10::/28"), "reserved"}, // ORCHID, deprecated
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	ipv4CompatiblePrefix = netip.MustParsePrefix("::/96")
	nat64WellKnownPrefix = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalUsePrefix  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFourPrefix      = netip.MustParsePrefix("2002::/16")
	teredoPrefix         = netip.MustParsePrefix("2001::/32")
	globalUnicastPrefix  = netip.MustParsePrefix("2000::/3")
)

// BlockedReason returns "" when ip is a public unicast address, else a short class name:
// "loopback", "private", "link-local", "cgnat", "unique-local", "site-local", "multicast",
// "unspecified", "broadcast", "reserved", "documentation", "benchmarking", "discard",
// "this-network" or "invalid". It is the single definition of "internal" shared by the
// registration check and the dial-time check, so the two can never disagree.
//
// Transition mechanisms can smuggle an IPv4 destination inside an IPv6 address, so the IPv4 address
// carried by IPv4-mapped (::ffff:0:0/96), IPv4-compatible (::/96 apart from :: and ::1), NAT64
// (64:ff9b::/96 and 64:ff9b:1::/48, last 32 bits), 6to4 (2002::/16, bits 16-47) and Teredo
// (2001::/32, client address in the last 32 bits XOR 0xffffffff) addresses is classified as that
// IPv4 address: carrying a public address is allowed, carrying a blocked one is blocked with its
// reason. IPv6 outside 2000::/3 is "reserved" because IANA allocates global unicast only from there.
func BlockedReason(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	// Prefix.Contains never matches a zoned address, and the zone does not change where the
	// packets go.
	ip = ip.WithZone("")
	if ip.Is4() || ip.Is4In6() {
		return blockedReason4(ip.Unmap())
	}
	for _, r := range blockedV6 {
		if r.prefix.Contains(ip) {
			return r.reason
		}
	}
	b := ip.As16()
	switch {
	case ipv4CompatiblePrefix.Contains(ip), nat64WellKnownPrefix.Contains(ip):
		return blockedReason4(netip.AddrFrom4([4]byte(b[12:16])))
	case nat64LocalUsePrefix.Contains(ip):
		// RFC 8215 lets an operator embed the IPv4 address at several prefix lengths; the /96
		// layout is the one deployed in practice, and the translator, not webhookd, has the
		// final say on where the packet goes anyway.
		return blockedReason4(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFourPrefix.Contains(ip):
		return blockedReason4(netip.AddrFrom4([4]byte(b[2:6])))
	case teredoPrefix.Contains(ip):
		return blockedReason4(netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	case !globalUnicastPrefix.Contains(ip):
		return "reserved"
	}
	return ""
}

func blockedReason4(ip netip.Addr) string {
	for _, r := range blockedV4 {
		if r.prefix.Contains(ip) {
			return r.reason
		}
	}
	return ""
}

// article picks "a" or "an" so refusal sentences shown to clients read naturally.
func article(word string) string {
	if strings.HasPrefix(word, "uni") { // "a unique-local", pronounced with a consonant
		return "a"
	}
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// CheckURL validates a receiver URL at registration time so customers learn about a bad URL when
// they register it rather than through a stream of failed deliveries. resolver may be nil
// (net.DefaultResolver). It is only a first line of defence: DNS answers can change after
// registration, which is why a name that does not resolve is accepted and DialControl repeats the
// address check on every connection.
func (p AddressPolicy) CheckURL(ctx context.Context, raw string, resolver *net.Resolver) error {
	if len(raw) > maxURLLength {
		return refuse("url must be at most %d characters", maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The parser's message quotes the whole input; a fixed sentence keeps the reason short.
		return refuse("url is not a valid URL")
	}
	if !u.IsAbs() {
		return refuse("url must be an absolute URL such as https://example.com/hook")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowHTTP:
	case p.AllowHTTP:
		return refuse("url must use http or https")
	default:
		return refuse("url must use https")
	}
	if u.Opaque != "" || u.Host == "" {
		return refuse("url must have a host")
	}
	if u.User != nil {
		return refuse("url must not contain credentials")
	}
	// url.Parse only leaves a '#' in its input as the fragment separator. Fragments are never sent
	// to the receiver, so one is a sign the customer pasted the wrong URL.
	if strings.Contains(raw, "#") {
		return refuse("url must not contain a fragment")
	}
	if port := u.Port(); port != "" || strings.HasSuffix(u.Host, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return refuse("url port must be a number from 1 to 65535")
		}
	}

	if strings.HasPrefix(u.Host, "[") {
		addr, err := netip.ParseAddr(u.Hostname())
		switch {
		case err != nil || !addr.Is6():
			return refuse("url host is not a valid IPv6 address")
		case addr.Zone() != "":
			// A zone names an interface of webhookd's own machine: never meaningful for a receiver.
			return refuse("url host must not contain an IPv6 zone")
		}
		return p.checkLiteral(addr)
	}

	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return refuse("url must have a host")
	}
	labels := strings.Split(host, ".")
	if allNumeric(labels) {
		// Resolvers disagree about 0x7f.1, 0177.0.0.1 or 2130706433 (inet_aton reads them as
		// 127.0.0.1, Go and DNS do not), so only the canonical dotted quad is unambiguous. Refused
		// even with AllowPrivate because it is about ambiguity, not about the address.
		addr, err := netip.ParseAddr(host)
		if err != nil || !addr.Is4() {
			return refuse("url host must be a host name or a canonical dotted-quad IPv4 address")
		}
		return p.checkLiteral(addr)
	}
	if isNumericLabel(labels[len(labels)-1]) {
		// No top-level domain is numeric, and WHATWG URL parsers read such hosts as IPv4.
		return refuse("url host must be a host name or a canonical dotted-quad IPv4 address")
	}
	if reason := hostNameProblem(host, labels); reason != "" {
		return refuse("%s", reason)
	}
	if p.AllowPrivate {
		return nil
	}
	if isLocalName(host, labels) {
		return refuse("url host must not be a local name (localhost, *.local, *.internal or a name without a dot)")
	}

	if resolver == nil {
		resolver = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		// The name may simply not exist yet; DialControl refuses blocked addresses on every
		// connection, so accepting here cannot open a hole.
		return nil
	}
	for _, addr := range addrs {
		if reason := BlockedReason(addr); reason != "" {
			return refuse("url host resolves to %s %s address (%s)", article(reason), reason, addr.Unmap())
		}
	}
	return nil
}

// CheckHost judges a broker's host:port (docs/destinations.md) as CheckURL judges an HTTPS
// receiver's host: the same names and addresses are refused, with the same switches.
func (p AddressPolicy) CheckHost(ctx context.Context, hostPort string, resolver *net.Resolver) error {
	return p.CheckURL(ctx, "https://"+hostPort+"/", resolver)
}

func (p AddressPolicy) checkLiteral(addr netip.Addr) error {
	if p.AllowPrivate {
		return nil
	}
	if reason := BlockedReason(addr); reason != "" {
		return refuse("url host is %s %s address (%s)", article(reason), reason, addr)
	}
	return nil
}

// isNumericLabel reports whether s is a number as inet_aton would read it: decimal, octal with a
// leading zero, or hexadecimal with 0x.
func isNumericLabel(s string) bool {
	if s == "" {
		return false
	}
	digits := "0123456789"
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s, digits = s[2:], "0123456789abcdefABCDEF"
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(digits, rune(s[i])) {
			return false
		}
	}
	return true
}

func allNumeric(labels []string) bool {
	for _, l := range labels {
		if !isNumericLabel(l) {
			return false
		}
	}
	return true
}

// hostNameProblem rejects anything but plain ASCII DNS names. Non-ASCII hosts are refused because
// the HTTP client maps them through IDNA at request time (fullwidth "１２７.０.０.１" becomes
// 127.0.0.1), so what was checked here would not be what gets dialed.
func hostNameProblem(host string, labels []string) string {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return "url host must be ASCII; use the punycode (xn--) form of an internationalized name"
		}
	}
	if len(host) > 253 {
		return "url host name is too long"
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "url host is not a valid host name"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "url host is not a valid host name"
			}
		}
	}
	return ""
}

// isLocalName catches names that resolve to the local machine or network through hosts files,
// mDNS or search domains, where the answer webhookd sees may differ from the one a later dial gets.
// The ".localdomain" suffix covers "localhost.localdomain".
func isLocalName(host string, labels []string) bool {
	if len(labels) == 1 {
		return true
	}
	for _, suffix := range []string{".localhost", ".local", ".internal", ".localdomain", ".home.arpa"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}

// DialControl is for net.Dialer.Control. It runs after DNS resolution with the literal address
// about to be connected to, so it is the authoritative check: a name that passed CheckURL and later
// rebinds to 127.0.0.1 is still refused. The error wraps ErrBlockedAddress so the delivery engine
// can classify the attempt as "blocked"; an address it cannot parse is refused too (fail closed).
func (p AddressPolicy) DialControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %s address %q", ErrBlockedAddress, network, address)
	}
	ip := ap.Addr().Unmap()
	if p.AllowPrivate {
		return nil
	}
	if reason := BlockedReason(ip); reason != "" {
		return fmt.Errorf("%w: %s is %s", ErrBlockedAddress, ip, reason)
	}
	return nil
}
