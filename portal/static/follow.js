// follow.js: while a delivery is under way, its page re-reads itself every few seconds and swaps in
// the part that changes (#live), until the delivery ends. The page works without it: it has a
// reload link.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !live.dataset.follow || !window.fetch || !window.DOMParser) {
    return;
  }
  var every = Math.max(1000, parseInt(live.dataset.follow, 10) || 2000);
  function poll() {
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (resp) {
        if (!resp.ok) {
          throw new Error("status " + resp.status);
        }
        return resp.text();
      })
      .then(function (text) {
        var next = new DOMParser().parseFromString(text, "text/html").getElementById("live");
        if (!next) {
          return;
        }
        live.replaceWith(next);
        live = next;
        if (live.dataset.follow) {
          window.setTimeout(poll, every);
        }
      })
      .catch(function () {
        // A failed read (the session ended, the server restarted) stops following; reloading the
        // page shows why.
      });
  }
  window.setTimeout(poll, every);
})();
