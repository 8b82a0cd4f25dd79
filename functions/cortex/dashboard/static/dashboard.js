// Cortex dashboard: sign-in, sign-out, and live updates. Pages are rendered by the server; this
// script only exchanges the key for a session cookie and, on each server-sent event, re-reads the
// page it is on and swaps its <main>. No polling: nothing is fetched unless an event arrived.
(function () {
  "use strict";

  function signIn(form) {
    var error = document.getElementById("sign-in-error");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      error.textContent = "";
      fetch("/api/v1/dashboard/session", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ key: form.elements.key.value })
      }).then(function (response) {
        if (response.ok) {
          window.location.assign(form.dataset.next || "/dashboard");
          return null;
        }
        return response.json().then(function (body) {
          error.textContent = (body.error && body.error.message) || ("sign-in failed: HTTP " + response.status);
        });
      }).catch(function (failure) {
        error.textContent = "sign-in failed: " + failure;
      });
    });
  }

  function live(body) {
    var busy = false;
    var again = false;
    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(window.location.href, { credentials: "same-origin" }).then(function (response) {
        if (response.redirected || !response.ok) {
          window.location.reload();
          return null;
        }
        return response.text().then(function (text) {
          var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("live");
          if (fresh) { document.getElementById("live").replaceWith(fresh); }
          body.dataset.updates = String(Number(body.dataset.updates || "0") + 1);
        });
      }).finally(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
    }
    var source = new EventSource("/api/v1/dashboard/events");
    source.addEventListener("ready", function () { body.dataset.live = "connected"; });
    source.addEventListener("change", refresh);
    source.addEventListener("expired", function () {
      source.close();
      window.location.assign("/dashboard/sign-in");
    });
    source.addEventListener("error", function () { body.dataset.live = "reconnecting"; });
  }

  function signOut(button) {
    button.addEventListener("click", function () {
      fetch("/api/v1/dashboard/session", { method: "DELETE", credentials: "same-origin" })
        .finally(function () { window.location.assign("/dashboard/sign-in"); });
    });
  }

  var form = document.getElementById("sign-in");
  if (form) { signIn(form); }
  var button = document.getElementById("sign-out");
  if (button) { signOut(button); }
  if (document.body.dataset.live) { live(document.body); }
})();
