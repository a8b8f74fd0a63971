// The inbox list refreshes itself: every few seconds it asks the server for the list again
// (server-rendered, escaped HTML) and swaps it in when it changed. Signed out: to the login.
(function () {
  "use strict";
  var region = document.getElementById("approvals");
  if (!region || !region.dataset.poll) return;
  var every = Number(region.dataset.every) || 3000;
  var last = null;
  function poll() {
    fetch(region.dataset.poll, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (response.status === 401) { window.location.assign(region.dataset.login); return null; }
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html !== null && html !== last) { last = html; region.innerHTML = html; }
      })
      .catch(function () { /* the server is away: try again next time */ })
      .then(function () { window.setTimeout(poll, every); });
  }
  window.setTimeout(poll, every);
})();
