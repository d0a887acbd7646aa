package portal

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"
)

// cookiePolicy is how the session cookie is set: HttpOnly always; Secure except for plain http on
// loopback (make run); SameSite=Lax, unless WEBHOOKD_PORTAL_FRAME_ANCESTORS lets a page on another
// site embed the portal. A browser sends a Lax cookie in no cross-site iframe, so then the cookie is
// SameSite=None, Secure and Partitioned (CHIPS): kept apart for each embedding site, so it follows
// no one across sites. CSRF tokens (checkCSRF) guard every change either way.
type cookiePolicy struct {
	secure      bool
	sameSite    http.SameSite
	partitioned bool
}

func newCookiePolicy(publicURL, frameAncestors string) cookiePolicy {
	if crossSiteAncestor(publicURL, frameAncestors) {
		return cookiePolicy{secure: true, sameSite: http.SameSiteNoneMode, partitioned: true}
	}
	return cookiePolicy{secure: secureCookie(publicURL), sameSite: http.SameSiteLaxMode}
}

// session is the cookie that carries a session id until expires.
func (p cookiePolicy) session(id string, expires time.Time) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: id, Path: Prefix, Expires: expires, MaxAge: int(time.Until(expires) / time.Second),
		HttpOnly: true, Secure: p.secure, SameSite: p.sameSite, Partitioned: p.partitioned}
}

// cleared is the cookie that makes the browser forget the session's.
func (p cookiePolicy) cleared() *http.Cookie {
	return &http.Cookie{Name: CookieName, Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: p.secure, SameSite: p.sameSite, Partitioned: p.partitioned}
}

// secureCookie: Secure everywhere but plain http on loopback (make run), where the browser would
// drop a Secure cookie.
func secureCookie(publicURL string) bool {
	u, err := url.Parse(publicURL)
	if err != nil || u.Scheme != "http" {
		return true
	}
	host := u.Hostname()
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// crossSiteAncestor reports whether a source of frameAncestors (a CSP source list) may be on
// another site than publicURL: another scheme, or another registrable domain (eTLD+1; an IP address
// or a single-label host is a site of its own). A scheme-only or wildcard-host source counts as
// another site; 'self' and 'none' do not.
func crossSiteAncestor(publicURL, frameAncestors string) bool {
	pu, err := url.Parse(publicURL)
	if err != nil {
		return true
	}
	own := siteOf(pu.Scheme, pu.Hostname())
	for _, src := range strings.Fields(frameAncestors) {
		switch {
		case src == "'self'" || src == "'none'":
			continue
		case strings.HasPrefix(src, "'"):
			return true // a keyword we do not know: assume the worst
		}
		scheme, rest, ok := strings.Cut(src, "://")
		if !ok {
			return true // "https:" or a bare host: any site
		}
		host := rest
		if i := strings.IndexAny(host, "/"); i >= 0 {
			host = host[:i]
		}
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		host = strings.TrimPrefix(host, "*.") // *.example.com: its sites are example.com's
		if siteOf(scheme, host) != own {
			return true
		}
	}
	return false
}

// siteOf is a browser's "schemeful site" of a host: its scheme and registrable domain.
func siteOf(scheme, host string) string {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if net.ParseIP(host) != nil || !strings.Contains(host, ".") {
		return scheme + "://" + host
	}
	if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		host = d
	}
	return scheme + "://" + host
}
