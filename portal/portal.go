// Package portal is the owner's portal (issue 20): server-rendered pages at /portal/ where the owner
// of an account sees and fixes its own webhooks, opened from a signed single-use link
// (accounts.Service.IssuePortalLink) that is exchanged for a session cookie. Pages come from
// html/template, which escapes everything a user or a receiver wrote; the CSS is embedded in the
// binary and no page needs JavaScript. Every change goes through the use cases (webhooks,
// accounts) that the REST handlers call, so the portal adds no rule of its own. docs/portal.md
// holds the decisions.
package portal

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/readiness"
	"github.com/webhookd/webhookd/tracing"
	"github.com/webhookd/webhookd/webhooks"
)

// Prefix is where the portal is mounted; its cookie's Path.
const Prefix = "/portal/"

// CookieName holds the session id (model.PortalSessionPrefix and 43 characters).
const CookieName = "webhookd_portal"

// csrfField is the hidden field of every form that changes something.
const csrfField = "csrf"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config carries the portal's dependencies.
type Config struct {
	// Webhooks runs the use cases of webhooks and their deliveries, as it does for the API: the
	// same rules, the same limits. Required.
	Webhooks *webhooks.Service
	// Accounts exchanges a link for a session, looks a session up and ends it. Required.
	Accounts *accounts.Service
	// Readiness tells an outage (503) from a defect (500). Required.
	Readiness *readiness.Checker
	Logger    *slog.Logger
	// PublicURL (WEBHOOKD_PUBLIC_URL) decides the cookie's Secure flag: set unless it is http on a
	// loopback address, where a browser would not send a Secure cookie back.
	PublicURL string
	// FrameAncestors is the CSP frame-ancestors (WEBHOOKD_PORTAL_FRAME_ANCESTORS), e.g. 'self'.
	FrameAncestors string
	// Registry, when set, gets the portal's request metrics (observe).
	Registry prometheus.Registerer
	// RateLimit and RateBurst bound link exchanges per client address (WEBHOOKD_RATE_LIMIT).
	// They and FrameAncestors are required.
	RateLimit float64
	RateBurst int
	// Tracer, when set, makes a server span of every request, named by its route (never its
	// address: /portal/enter's query holds the link's token). Nil installs nothing.
	Tracer trace.Tracer
}

// Server serves the portal's pages.
type Server struct {
	webhooks  *webhooks.Service
	accounts  *accounts.Service
	readiness *readiness.Checker
	log       *slog.Logger
	cookie    cookiePolicy
	csp       string
	pages     map[string]*template.Template
	echo      *echo.Echo
}

// New builds the portal and its routes, all under Prefix.
func New(cfg Config) (*Server, error) {
	// The limits and the frame ancestors are the caller's to set (cmd/webhookd's Config has their
	// defaults): a zero would refuse every link, an empty source list every frame.
	switch {
	case cfg.Webhooks == nil:
		return nil, errors.New("portal: Webhooks is required")
	case cfg.Accounts == nil:
		return nil, errors.New("portal: Accounts is required")
	case cfg.Readiness == nil:
		return nil, errors.New("portal: Readiness is required")
	case cfg.RateLimit <= 0 || cfg.RateBurst <= 0:
		return nil, fmt.Errorf("portal: RateLimit %v, RateBurst %d: must be positive", cfg.RateLimit, cfg.RateBurst)
	case cfg.FrameAncestors == "" || strings.ContainsAny(cfg.FrameAncestors, ";,\r\n"):
		return nil, fmt.Errorf("portal frame ancestors %q: not one CSP directive's sources", cfg.FrameAncestors)
	case cfg.Logger == nil:
		cfg.Logger = slog.Default()
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{
		webhooks: cfg.Webhooks, accounts: cfg.Accounts, readiness: cfg.Readiness, log: cfg.Logger,
		cookie: newCookiePolicy(cfg.PublicURL, cfg.FrameAncestors), pages: pages,
		csp: "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; " +
			"base-uri 'none'; form-action 'self'; frame-ancestors " + cfg.FrameAncestors,
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// The exchange's rate limit keys on the connection's address: X-Forwarded-For is the client's
	// to write, so trusting it would let one client take every bucket but its own.
	e.IPExtractor = echo.ExtractIPDirect()
	e.HTTPErrorHandler = s.handleError
	observer, err := observe(cfg.Registry, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if cfg.Tracer != nil {
		e.Use(tracing.ServerSpans(cfg.Tracer))
	}
	e.Use(observer, s.headers, middleware.Recover())
	limiter := middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: rate.Limit(cfg.RateLimit), Burst: cfg.RateBurst, ExpiresIn: 3 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) { return c.RealIP(), nil },
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(1/cfg.RateLimit+0.999))))
			return &pageError{status: http.StatusTooManyRequests, title: "Too many attempts", message: "Too many links were opened from your address. Wait a moment and open the link again."}
		},
	})
	small := formLimit()
	g := e.Group(strings.TrimSuffix(Prefix, "/"))
	g.GET("/enter", s.enter, limiter, singleParameters)
	g.GET("/static/*", assets(static), singleParameters)
	h := &endpointHandlers{Server: s}
	read := []echo.MiddlewareFunc{s.session, singleParameters}
	write := []echo.MiddlewareFunc{small, s.session, singleParameters, s.checkCSRF, s.writable}
	g.GET("/", h.list, read...)
	g.POST("/webhooks", h.create, write...)
	g.GET("/webhooks/:id/edit", h.edit, read...)
	g.POST("/webhooks/:id/url", h.updateURL, write...)
	g.POST("/webhooks/:id/disable", h.disable, write...)
	g.POST("/webhooks/:id/enable", h.enable, write...)
	registerEndpointRoutes(g, s, read, write)
	registerNotificationRoutes(g, s, read, write)
	g.GET("/webhooks/:id/delete", h.confirmDelete, read...)
	g.POST("/webhooks/:id/delete", h.delete, write...)
	g.GET("/audit", s.auditPage, read...)
	g.POST("/logout", s.logout, small, s.session, singleParameters, s.checkCSRF)
	if err := registerEventRoutes(g, s, read, write); err != nil {
		return nil, err
	}
	s.echo = e
	return s, nil
}

// assets serves the embedded CSS and script under Prefix+"static/", by file name only. A path
// that names a directory (the folder itself, anything ending in '/', a subdirectory without its
// '/') is the portal's 404 page, as a missing file is: never a listing, nor a redirect to one.
// Echo's handler also refuses "." and ".." segments, escaped or not.
func assets(files fs.FS) echo.HandlerFunc {
	serve := echo.StaticDirectoryHandler(filesOnly{files}, false)
	return func(c echo.Context) error {
		// The handler cleans "portal.css/" to the file; a path ending in '/' names a directory.
		if strings.HasSuffix(c.Request().URL.Path, "/") {
			return echo.ErrNotFound
		}
		return serve(c)
	}
}

// filesOnly is a file system whose directories do not open, so a handler serving it finds no
// directory to list or to redirect to.
type filesOnly struct{ fs.FS }

func (f filesOnly) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	if info, err := file.Stat(); err != nil || info.IsDir() {
		_ = file.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return file, nil
}

// ServeHTTP makes the portal an http.Handler, to be mounted at Prefix.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// headers sets what every portal response carries, error pages included.
func (s *Server) headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", s.csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if !strings.HasPrefix(c.Request().URL.Path, Prefix+"static/") {
			// Pages hold a session's data and its CSRF token: no shared cache keeps them.
			h.Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

const contextSession = "portal.session"

func sessionOf(c echo.Context) *model.PortalSession {
	return c.Get(contextSession).(*model.PortalSession)
}

// session admits a request whose cookie names a live session.
func (s *Server) session(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		cookie, err := c.Cookie(CookieName)
		if err != nil {
			return errNoSession
		}
		session, err := s.accounts.PortalSession(c.Request().Context(), cookie.Value)
		if errors.Is(err, accounts.ErrSessionEnded) {
			return errNoSession
		}
		if err != nil {
			return err
		}
		c.Set(contextSession, session)
		// The use cases record the session as who made the changes (the audit log).
		c.SetRequest(c.Request().WithContext(audit.WithActor(c.Request().Context(), audit.Portal(session.ID, session.ReadOnly))))
		c.Set(contextCSRF, csrfToken(cookie.Value))
		return next(c)
	}
}

const contextCSRF = "portal.csrf"

// csrfToken is the session's CSRF token: an HMAC of a fixed label keyed by the session id, so it
// needs no storage and no server key, and only who holds the session id (the HttpOnly cookie,
// which another site's page cannot read) can compute it.
func csrfToken(sessionID string) string {
	mac := hmac.New(sha256.New, []byte(sessionID))
	mac.Write([]byte("webhookd portal csrf v1"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// checkCSRF refuses a change whose form does not carry the session's CSRF token.
func (s *Server) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		want := c.Get(contextCSRF).(string)
		if got := c.Request().PostFormValue(csrfField); subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return &pageError{status: http.StatusForbidden, title: "Form expired", message: "This form did not come from your portal session. Reload the page and try again."}
		}
		return next(c)
	}
}

// writable refuses every change in a read-only session.
func (s *Server) writable(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if sessionOf(c).ReadOnly {
			return &pageError{status: http.StatusForbidden, title: "Read-only", message: "This portal session is read-only: it shows everything and changes nothing."}
		}
		return next(c)
	}
}

// enter is GET /portal/enter?token=: the link's token for a session cookie, then the endpoints
// page at a URL without the token, so it stays out of the history and of any Referer.
func (s *Server) enter(c echo.Context) error {
	sid, session, err := s.accounts.EnterPortal(c.Request().Context(), c.QueryParam("token"))
	switch {
	case errors.Is(err, accounts.ErrLinkInvalid):
		return &pageError{status: http.StatusUnauthorized, title: "Link not valid", message: "This portal link is not valid or has expired. Ask for a new link."}
	case errors.Is(err, accounts.ErrLinkUsed):
		return &pageError{status: http.StatusForbidden, title: "Link already used", message: "This portal link was already opened: a link opens once. Ask for a new link."}
	case err != nil:
		return err
	}
	c.SetCookie(s.cookie.session(sid, session.ExpiresAt))
	return c.Redirect(http.StatusSeeOther, Prefix)
}

// singleParameters refuses a query parameter given more than once with a 400 page naming it, on
// every route, as the API refuses one (input.RepeatedParameter): which of two values a page read
// would be an accident. The page names the parameter, never a value: /portal/enter's is a token.
func singleParameters(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if name, ok := input.RepeatedParameter(c.QueryParams()); ok {
			if short, cut := firstBytes(name, 64); cut {
				name = short + "…"
			}
			return &pageError{status: http.StatusBadRequest, title: "Address not valid",
				message: "The address gives “" + name + "” more than once. Open the page from the portal's own links, or the link exactly as you were given it."}
		}
		return next(c)
	}
}

// maxFormBytes bounds the body of every form the portal takes, as the API bounds its management
// calls.
const maxFormBytes = 64 << 10

// errFormTooLarge answers a form over maxFormBytes, whether its Content-Length said so or its
// chunked body went past the limit.
var errFormTooLarge = &pageError{status: http.StatusRequestEntityTooLarge, title: "Form too large",
	message: fmt.Sprintf("This form is larger than %d KiB, the most the portal takes. Shorten what you entered and send it again.", maxFormBytes>>10)}

// formLimit bounds a form's body to maxFormBytes and parses the form at once, so that a chunked
// body over the limit is the limit's 413 (errFormTooLarge) too. Parsed later, by the CSRF check
// or a handler's FormValue, which drop the error, it would read as a form without its token: 403.
// Any other parse error is left to them, as before.
func formLimit() echo.MiddlewareFunc {
	limited := middleware.BodyLimit(fmt.Sprintf("%dKiB", maxFormBytes>>10))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return limited(func(c echo.Context) error {
			// ParseMultipartForm alone would answer a URL-encoded form's error with "not multipart";
			// a multipart reader stops at the closing boundary, so what follows is read too.
			req := c.Request()
			err := req.ParseForm()
			if err == nil {
				err = req.ParseMultipartForm(maxFormBytes)
			}
			if err == nil || errors.Is(err, http.ErrNotMultipart) {
				_, err = io.Copy(io.Discard, req.Body)
			}
			if he := (*echo.HTTPError)(nil); errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge {
				return errFormTooLarge
			}
			return next(c)
		})
	}
}

// pageError is an error a person may read: its page's title and message, and the status.
type pageError struct {
	status         int
	title, message string
}

func (e *pageError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.title, e.message) }

var (
	errNoSession = &pageError{status: http.StatusUnauthorized, title: "Session ended", message: "Your portal session has ended or was revoked. Ask for a new link."}
	errNotFound  = &pageError{status: http.StatusNotFound, title: "Not found", message: "There is no such page, or no such endpoint in this portal."}
)

// handleError renders every error as a plain page: what a person may read for a pageError, a
// generic message for anything else (logged), 503 when the database is away.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	pe := s.toPageError(c, err)
	if pe.status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "5")
	}
	if err := s.render(c, pe.status, "error", map[string]any{"Title": pe.title, "Message": pe.message}); err != nil {
		s.log.Error("portal: write error page", "err", err)
	}
}

func (s *Server) toPageError(c echo.Context, err error) *pageError {
	var pe *pageError
	if errors.As(err, &pe) {
		return pe
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code < 500 {
		switch he.Code {
		case http.StatusNotFound:
			return errNotFound
		case http.StatusRequestEntityTooLarge: // formLimit, for the Content-Length
			return errFormTooLarge
		}
		return &pageError{status: he.Code, title: http.StatusText(he.Code), message: "The request could not be handled."}
	}
	switch {
	case errors.Is(err, webhooks.ErrNotFound):
		return errNotFound
	case errors.Is(err, webhooks.ErrCanceled):
		return &pageError{status: http.StatusConflict, title: "Cannot resend",
			message: "This delivery was canceled when its endpoint was deleted, and cannot be sent again."}
	case errors.Is(err, webhooks.ErrUnavailable):
		return &pageError{status: http.StatusServiceUnavailable, title: "Unavailable",
			message: "Deliveries cannot be queued right now; nothing was sent. Try again in a moment."}
	}
	unavailable := &pageError{status: http.StatusServiceUnavailable, title: "Unavailable", message: "The service is temporarily unavailable; nothing was changed. Try again in a moment."}
	if model.IsBusy(err) || !s.readiness.DatabaseUp(c.Request().Context()) {
		s.log.Warn("portal: unavailable", "path", c.Path(), "err", err)
		return unavailable
	}
	s.log.Error("portal: internal error", "method", c.Request().Method, "path", c.Path(), "err", err)
	return &pageError{status: http.StatusInternalServerError, title: "Something went wrong", message: "The page could not be shown. Try again; if it keeps failing, tell the service's operator."}
}
