package portal

// CSRFToken is a session's CSRF token, for tests of a read-only session, whose pages carry none.
var CSRFToken = csrfToken

// CrossSiteAncestor is crossSiteAncestor, for its table test.
var CrossSiteAncestor = crossSiteAncestor
