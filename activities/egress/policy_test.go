package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// teredoAddr builds a Teredo address the way a Teredo client derives its own: the mapped port and
// client IPv4 are stored XOR 0xffff / 0xffffffff so NATs do not rewrite them.
func teredoAddr(server, client netip.Addr, port uint16) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0x20, 0x01
	s := server.As4()
	copy(b[4:8], s[:])
	b[8] = 0x80 // cone NAT flag
	binary.BigEndian.PutUint16(b[10:12], ^port)
	c := client.As4()
	for i := range c {
		b[12+i] = ^c[i]
	}
	return netip.AddrFrom16(b)
}

func TestBlockedReason(t *testing.T) {
	teredoServer := netip.MustParseAddr("65.54.227.120")
	teredoLoopback := teredoAddr(teredoServer, netip.MustParseAddr("127.0.0.1"), 40000)
	teredoPublic := teredoAddr(teredoServer, netip.MustParseAddr("8.8.8.8"), 40000)
	if got := teredoLoopback.String(); got != "2001:0:4136:e378:8000:63bf:80ff:fffe" {
		t.Fatalf("teredoAddr built %s", got)
	}

	tests := []struct {
		ip   string
		want string
	}{
		// public
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
		// 0.0.0.0/8
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"0.255.255.255", "this-network"},
		{"1.0.0.0", ""},
		// 10/8
		{"9.255.255.255", ""},
		{"10.0.0.0", "private"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"11.0.0.0", ""},
		// 100.64/10
		{"100.63.255.255", ""},
		{"100.64.0.0", "cgnat"},
		{"100.64.0.1", "cgnat"},
		{"100.127.255.255", "cgnat"},
		{"100.128.0.0", ""},
		// 127/8
		{"126.255.255.255", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"128.0.0.0", ""},
		// 169.254/16
		{"169.253.255.255", ""},
		{"169.254.0.0", "link-local"},
		{"169.254.169.254", "link-local"},
		{"169.255.0.0", ""},
		// 172.16/12
		{"172.15.255.255", ""},
		{"172.16.0.0", "private"},
		{"172.31.255.255", "private"},
		{"172.32.0.0", ""},
		// 192.0.0/24, 192.0.2/24
		{"191.255.255.255", ""},
		{"192.0.0.0", "reserved"},
		{"192.0.0.255", "reserved"},
		{"192.0.1.0", ""},
		{"192.0.2.1", "documentation"},
		{"192.0.3.0", ""},
		// 192.168/16
		{"192.167.255.255", ""},
		{"192.168.0.0", "private"},
		{"192.168.1.1", "private"},
		{"192.169.0.0", ""},
		// 198.18/15
		{"198.17.255.255", ""},
		{"198.18.0.0", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.20.0.0", ""},
		// 198.51.100/24, 203.0.113/24
		{"198.51.99.255", ""},
		{"198.51.100.7", "documentation"},
		{"198.51.101.0", ""},
		{"203.0.112.255", ""},
		{"203.0.113.9", "documentation"},
		{"203.0.114.0", ""},
		// 224/4, 240/4
		{"223.255.255.255", ""},
		{"224.0.0.0", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.0", "reserved"},
		{"250.1.2.3", "reserved"},
		{"255.255.255.254", "reserved"},
		{"255.255.255.255", "broadcast"},
		// IPv6
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf:ffff::1", "link-local"},
		{"fec0::1", "site-local"},
		{"fc00::1", "unique-local"},
		{"fd12:3456:789a::1", "unique-local"},
		{"fbff:ffff::1", "reserved"},
		{"ff02::1", "multicast"},
		{"ff0e::101", "multicast"},
		{"2001:db8::1", "documentation"},
		{"2001:db9::1", ""},
		{"2001:db7:ffff::1", ""},
		{"3fff::1", "documentation"},
		{"2001:2::1", "benchmarking"},
		{"100::1", "discard"},
		{"100::ffff:ffff:ffff:ffff", "discard"},
		{"100:0:0:1::", "reserved"},
		{"4000::1", "reserved"},
		// IPv4-mapped
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:8.8.8.8", ""},
		// IPv4-compatible
		{"::127.0.0.1", "loopback"},
		{"::10.0.0.1", "private"},
		{"::8.8.8.8", ""},
		{"::2", "this-network"},
		// NAT64
		{"64:ff9b::7f00:1", "loopback"},
		{"64:ff9b::10.1.2.3", "private"},
		{"64:ff9b::8.8.8.8", ""},
		{"64:ff9b:1::a9fe:a9fe", "link-local"},
		{"64:ff9b:1::8.8.8.8", ""},
		// 6to4
		{"2002:7f00:1::", "loopback"},
		{"2002:0a00:0001::1", "private"},
		{"2002:a9fe:a9fe::1", "link-local"},
		{"2002:0808:0808::1", ""},
		// Teredo
		{teredoLoopback.String(), "loopback"},
		{teredoPublic.String(), ""},
		{"2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"}, // client 10.0.0.1
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			if got := BlockedReason(ip); got != tt.want {
				t.Errorf("BlockedReason(%s) = %q, want %q", tt.ip, got, tt.want)
			}
		})
	}

	if got := BlockedReason(netip.Addr{}); got == "" {
		t.Errorf("BlockedReason(zero Addr) = %q, want a refusal", got)
	}
}

// testDNS is a minimal authoritative UDP DNS server so resolution is tested without the internet.
type testDNS struct {
	conn    net.PacketConn
	records map[string][]netip.Addr
	wg      sync.WaitGroup
}

// startTestDNS serves records (lower-case names without trailing dot) and answers NXDOMAIN for
// every other name. It returns a resolver that sends all its queries to the server.
func startTestDNS(t *testing.T, records map[string][]string) *net.Resolver {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testDNS{conn: conn, records: map[string][]netip.Addr{}}
	for name, addrs := range records {
		for _, a := range addrs {
			s.records[name] = append(s.records[name], netip.MustParseAddr(a))
		}
	}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		conn.Close()
		s.wg.Wait()
	})
	server := conn.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", server)
		},
	}
}

func (s *testDNS) serve() {
	defer s.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := s.answer(buf[:n]); resp != nil {
			_, _ = s.conn.WriteTo(resp, from)
		}
	}
}

const (
	dnsTypeA    = 1
	dnsTypeAAAA = 28
)

func (s *testDNS) answer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	off := 12
	var labels []string
	for {
		if off >= len(q) {
			return nil
		}
		l := int(q[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[off:off+l]))
		off += l
	}
	if off+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[off : off+2])
	question := q[12 : off+4]
	name := strings.ToLower(strings.Join(labels, "."))

	addrs, known := s.records[name]
	var answers [][]byte
	for _, a := range addrs {
		switch {
		case qtype == dnsTypeA && a.Is4():
			b := a.As4()
			answers = append(answers, b[:])
		case qtype == dnsTypeAAAA && a.Is6():
			b := a.As16()
			answers = append(answers, b[:])
		}
	}

	resp := make([]byte, 12, 512)
	copy(resp[0:2], q[0:2])           // ID
	resp[2] = 0x80 | 0x04 | q[2]&0x01 // QR, AA, copy RD
	resp[3] = 0x80                    // RA
	if !known {
		resp[3] |= 3 // NXDOMAIN
	}
	binary.BigEndian.PutUint16(resp[4:6], 1)
	binary.BigEndian.PutUint16(resp[6:8], uint16(len(answers)))
	resp = append(resp, question...)
	for _, rdata := range answers {
		resp = append(resp, 0xc0, 0x0c) // pointer to the question name
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // IN
		resp = binary.BigEndian.AppendUint32(resp, 60)
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(rdata)))
		resp = append(resp, rdata...)
	}
	return resp
}

func TestCheckURL(t *testing.T) {
	resolver := startTestDNS(t, map[string][]string{
		"rebind.example.test":   {"127.0.0.1"},
		"public.example.test":   {"93.184.216.34"},
		"mixed.example.test":    {"93.184.216.34", "10.0.0.5"},
		"v6loop.example.test":   {"::1"},
		"v6public.example.test": {"2606:4700:4700::1111"},
		"metadata.example.test": {"169.254.169.254"},
	})
	prod := AddressPolicy{}
	withHTTP := AddressPolicy{AllowHTTP: true}
	private := AddressPolicy{AllowPrivate: true}

	tests := []struct {
		name   string
		policy AddressPolicy
		url    string
		reason string // "" means accepted; otherwise a substring of the refusal
	}{
		{"https public literal", prod, "https://8.8.8.8/hook", ""},
		{"https public literal with port", prod, "https://8.8.8.8:8443/hook?x=1", ""},
		{"public IPv6 literal", prod, "https://[2606:4700:4700::1111]/hook", ""},
		{"http refused", prod, "http://8.8.8.8/hook", "must use https"},
		{"http allowed with AllowHTTP", withHTTP, "http://8.8.8.8/hook", ""},
		{"ftp refused with AllowHTTP", withHTTP, "ftp://8.8.8.8/hook", "must use http or https"},
		{"user and password", prod, "https://user:pass@8.8.8.8/hook", "credentials"},
		{"user only", prod, "https://user@8.8.8.8/hook", "credentials"},
		{"empty userinfo", prod, "https://@8.8.8.8/hook", "credentials"},
		{"too long", prod, "https://8.8.8.8/" + strings.Repeat("a", 2048), "at most 2048"},
		{"relative", prod, "/hook", "absolute"},
		{"no scheme", prod, "example.com/hook", "absolute"},
		{"empty", prod, "", "absolute"},
		{"opaque", prod, "https:example.com", "host"},
		{"no host", prod, "https:///hook", "host"},
		{"unparseable", prod, "https://exa mple.com/", "not a valid URL"},
		{"fragment", prod, "https://8.8.8.8/hook#frag", "fragment"},
		{"empty fragment", prod, "https://8.8.8.8/hook#", "fragment"},
		{"port zero", prod, "https://8.8.8.8:0/", "port"},
		{"port too big", prod, "https://8.8.8.8:65536/", "port"},
		{"empty port", prod, "https://8.8.8.8:/", "port"},
		{"localhost", prod, "https://localhost/x", "local name"},
		{"localhost upper with dot", prod, "https://LocalHost./x", "local name"},
		{"sub.localhost", prod, "https://foo.localhost", "local name"},
		{"localhost.localdomain", prod, "https://localhost.localdomain/", "local name"},
		{"mdns", prod, "https://printer.local/", "local name"},
		{"internal", prod, "https://metadata.google.internal/", "local name"},
		{"single label", prod, "https://intranet/hook", "local name"},
		{"loopback literal", prod, "https://127.0.0.1", "loopback address (127.0.0.1)"},
		{"loopback v6 literal", prod, "https://[::1]", "loopback"},
		{"mapped loopback", prod, "https://[::ffff:127.0.0.1]", "loopback"},
		{"zone id", prod, "https://[fe80::1%25eth0]/", "zone"},
		{"metadata", prod, "https://169.254.169.254/latest", "link-local"},
		{"private", prod, "https://10.0.0.1", "private address (10.0.0.1)"},
		{"cgnat", prod, "https://100.64.0.1", "cgnat"},
		{"unspecified article", prod, "https://0.0.0.0/", "an unspecified address"},
		{"decimal integer", prod, "https://2130706433", "canonical"},
		{"hex integer", prod, "https://0x7f000001", "canonical"},
		{"hex part", prod, "https://0x7f.0.0.1", "canonical"},
		{"octal", prod, "https://0177.0.0.1", "canonical"},
		{"octal private", prod, "https://010.0.0.1", "canonical"},
		{"short form", prod, "https://127.1", "canonical"},
		{"short form three parts", prod, "https://10.1.1", "canonical"},
		{"leading zero last", prod, "https://8.8.8.08", "canonical"},
		{"octet overflow", prod, "https://8.8.8.256", "canonical"},
		{"five parts", prod, "https://1.2.3.4.5", "canonical"},
		{"numeric last label", prod, "https://example.123", "canonical"},
		{"fullwidth digits", prod, "https://１２７.０.０.１/", "ASCII"},
		{"bad characters", prod, "https://exa!mple.test/", "not a valid host name"},
		{"empty label", prod, "https://a..example.test/", "not a valid host name"},
		{"AllowPrivate loopback", private, "https://127.0.0.1:8443", ""},
		{"AllowPrivate localhost", private, "https://localhost:8443/x", ""},
		{"AllowPrivate still refuses hex", private, "https://0x7f000001", "canonical"},
		{"AllowPrivate still refuses short form", private, "https://127.1", "canonical"},
		{"AllowPrivate still refuses zone", private, "https://[fe80::1%25eth0]/", "zone"},
		{"AllowPrivate still refuses credentials", private, "https://u:p@127.0.0.1/", "credentials"},
		// Resolution through the in-test DNS server.
		{"rebinding name", prod, "https://rebind.example.test/hook", "resolves to a loopback address (127.0.0.1)"},
		{"public name", prod, "https://public.example.test/hook", ""},
		{"public name trailing dot", prod, "https://PUBLIC.example.test./hook", ""},
		{"one public one private", prod, "https://mixed.example.test/hook", "resolves to a private address (10.0.0.5)"},
		{"IPv6 loopback name", prod, "https://v6loop.example.test/", "loopback"},
		{"IPv6 public name", prod, "https://v6public.example.test/", ""},
		{"metadata name", prod, "https://metadata.example.test/", "link-local"},
		{"nxdomain accepted", prod, "https://nxdomain.example.test/hook", ""},
		{"AllowPrivate skips resolution", private, "https://rebind.example.test/hook", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.CheckURL(context.Background(), tt.url, resolver)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("CheckURL(%q) = %v, want accepted", tt.url, err)
				}
				return
			}
			var ue *URLError
			if !errors.As(err, &ue) {
				t.Fatalf("CheckURL(%q) = %v (%T), want *URLError", tt.url, err, err)
			}
			if !strings.Contains(ue.Reason, tt.reason) {
				t.Fatalf("CheckURL(%q) reason = %q, want it to contain %q", tt.url, ue.Reason, tt.reason)
			}
			if ue.Error() != ue.Reason {
				t.Fatalf("Error() = %q, want the Reason %q", ue.Error(), ue.Reason)
			}
		})
	}
}

func TestCheckURLUnreachableResolver(t *testing.T) {
	// With no DNS at all the URL is accepted: DialControl is the authoritative check.
	dead := &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no network")
		},
	}
	start := time.Now()
	if err := (AddressPolicy{}).CheckURL(context.Background(), "https://unreachable.example.test/hook", dead); err != nil {
		t.Fatalf("CheckURL with a dead resolver = %v, want accepted", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("CheckURL took %v despite the resolution timeout", d)
	}
}

func TestDialControl(t *testing.T) {
	tests := []struct {
		name    string
		policy  AddressPolicy
		network string
		address string
		blocked bool
	}{
		{"loopback v4", AddressPolicy{}, "tcp4", "127.0.0.1:443", true},
		{"loopback v6", AddressPolicy{}, "tcp6", "[::1]:443", true},
		{"mapped loopback", AddressPolicy{}, "tcp6", "[::ffff:127.0.0.1]:443", true},
		{"metadata", AddressPolicy{}, "tcp4", "169.254.169.254:80", true},
		{"zoned link-local", AddressPolicy{}, "tcp6", "[fe80::1%eth0]:443", true},
		{"nat64 private", AddressPolicy{}, "tcp6", "[64:ff9b::a00:1]:443", true},
		{"public v4", AddressPolicy{}, "tcp4", "93.184.216.34:443", false},
		{"public v6", AddressPolicy{}, "tcp6", "[2606:4700:4700::1111]:443", false},
		{"unparseable", AddressPolicy{}, "tcp", "example.com:443", true},
		{"unparseable even with AllowPrivate", AddressPolicy{AllowPrivate: true}, "unix", "/run/x.sock", true},
		{"AllowPrivate loopback", AddressPolicy{AllowPrivate: true}, "tcp4", "127.0.0.1:443", false},
		{"AllowPrivate v6 loopback", AddressPolicy{AllowPrivate: true}, "tcp6", "[::1]:443", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.DialControl(tt.network, tt.address, nil)
			if !tt.blocked {
				if err != nil {
					t.Fatalf("DialControl(%q) = %v, want nil", tt.address, err)
				}
				return
			}
			if !errors.Is(err, ErrBlockedAddress) {
				t.Fatalf("DialControl(%q) = %v, want an error wrapping ErrBlockedAddress", tt.address, err)
			}
		})
	}

	err := AddressPolicy{}.DialControl("tcp4", "127.0.0.1:443", nil)
	if want := "blocked address: 127.0.0.1 is loopback"; err == nil || err.Error() != want {
		t.Fatalf("DialControl error = %v, want %q", err, want)
	}
}

// acceptOnce reports what the listener's Accept returned within a short deadline, closing any
// connection it got.
func acceptOnce(ln *net.TCPListener) <-chan error {
	done := make(chan error, 1)
	go func() {
		_ = ln.SetDeadline(time.Now().Add(300 * time.Millisecond))
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	return done
}

func TestDialControlEndToEnd(t *testing.T) {
	listen := func(t *testing.T) *net.TCPListener {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.(*net.TCPListener)
	}

	t.Run("blocked", func(t *testing.T) {
		ln := listen(t)
		accepted := acceptOnce(ln)
		d := net.Dialer{Timeout: time.Second, Control: AddressPolicy{}.DialControl}
		conn, err := d.Dial("tcp", ln.Addr().String())
		if err == nil {
			conn.Close()
			t.Fatal("dial to 127.0.0.1 succeeded, want it blocked")
		}
		if !errors.Is(err, ErrBlockedAddress) {
			t.Fatalf("dial error = %v, want one wrapping ErrBlockedAddress", err)
		}
		aerr := <-accepted
		var ne net.Error
		if !errors.As(aerr, &ne) || !ne.Timeout() {
			t.Fatalf("Accept returned %v, want a deadline timeout (no connection)", aerr)
		}
	})

	t.Run("AllowPrivate", func(t *testing.T) {
		ln := listen(t)
		accepted := acceptOnce(ln)
		d := net.Dialer{Timeout: time.Second, Control: AddressPolicy{AllowPrivate: true}.DialControl}
		conn, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial with AllowPrivate = %v, want success", err)
		}
		conn.Close()
		if aerr := <-accepted; aerr != nil {
			t.Fatalf("Accept returned %v, want the connection", aerr)
		}
	})
}
