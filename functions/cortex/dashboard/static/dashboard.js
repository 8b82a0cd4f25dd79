// Cortex dashboard: sign-in, sign-out, the usage charts, and live updates. Pages are rendered by
// the server; this script exchanges the key for a session cookie, draws the usage charts with the
// vendored Chart.js from the page's JSON data block (#usage-data), and, on each server-sent event,
// re-reads the page it is on, swaps its <main> and draws the charts again from the new data.
// No polling: nothing is fetched unless an event arrived.
(function () {
  "use strict";

  // Bars by share of the daily budget (the server decides the level): green to 80 %, amber to 100 %, red beyond.
  var LEVEL_COLOURS = { ok: "#16a34a", near: "#d97706", over: "#dc2626" };
  var BUDGET_COLOUR = "#e5e7eb";
  // Lines by agent, in colours that are none of the bars' (a red line would read as "over budget").
  var PALETTE = ["#2563eb", "#7c3aed", "#0891b2", "#be185d", "#4b5563", "#0f766e", "#a21caf", "#1e3a8a"];
  var charts = [];

  function tokens(value) { return Number(value).toLocaleString("en"); }

  function budgetChart(canvas, rows) {
    // The box's height is set only here (CSSOM, which the CSP allows): without the script the box holds
    // just the canvas's fallback text. One row per agent.
    canvas.parentNode.style.height = (48 + 30 * rows.length) + "px";
    return new window.Chart(canvas, {
      type: "bar",
      data: {
        labels: rows.map(function (r) { return r.agent; }),
        datasets: [
          { label: "used today", data: rows.map(function (r) { return r.used; }),
            backgroundColor: rows.map(function (r) { return LEVEL_COLOURS[r.level]; }),
            grouped: false, order: 1, barPercentage: 0.55 },
          // Drawn behind the used bar (higher order first): the bar fills its budget.
          { label: "daily budget", data: rows.map(function (r) { return r.budget; }),
            backgroundColor: BUDGET_COLOUR, grouped: false, order: 2, barPercentage: 0.85 }
        ]
      },
      options: {
        indexAxis: "y",
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        scales: { x: { beginAtZero: true, ticks: { callback: tokens } } },
        plugins: {
          legend: { display: false },
          tooltip: { callbacks: { label: function (item) {
            var r = rows[item.dataIndex];
            if (item.datasetIndex === 1) { return "daily budget " + tokens(r.budget); }
            var share = r.share === null ? "no budget" : Math.round(r.share * 100) + " %";
            return "used " + tokens(r.used) + " of " + tokens(r.budget) + " (" + share + ")";
          } } }
        }
      }
    });
  }

  function lineChart(canvas, days) {
    canvas.parentNode.style.height = "320px";
    return new window.Chart(canvas, {
      type: "line",
      data: {
        labels: days.days,
        datasets: days.agents.map(function (a, i) {
          var colour = PALETTE[i % PALETTE.length];
          return { label: a.agent, data: a.tokens, borderColor: colour, backgroundColor: colour,
                   borderWidth: 2, pointRadius: 2, tension: 0 };
        })
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          // Days as MM-DD on the axis, unrotated; the tooltip shows the whole date.
          x: { ticks: { maxRotation: 0, autoSkipPadding: 12,
                        callback: function (value) { return this.getLabelForValue(value).slice(5); } } },
          y: { beginAtZero: true, ticks: { callback: tokens } }
        },
        plugins: { legend: { position: "bottom" } }
      }
    });
  }

  // (Re)draws the charts of the page from its data block; a swapped <main> brings new canvases and
  // data, so the old charts are destroyed first (they hold resize observers and their canvases).
  function drawCharts() {
    charts.forEach(function (chart) { chart.destroy(); });
    charts = [];
    var block = document.getElementById("usage-data");
    if (!block || !window.Chart) { return; }  // no charts here, or the library did not load: the tables stay
    try {
      var data = JSON.parse(block.textContent);
      var today = document.getElementById("usage-today-chart");
      if (today && data.today) { charts.push(budgetChart(today, data.today)); }
      var days = document.getElementById("usage-days-chart");
      if (days && data.days) { charts.push(lineChart(days, data.days)); }
    } catch (failure) {
      // A chart that cannot be drawn leaves its table; sign-out and live updates go on.
      console.error("dashboard charts:", failure);
    }
  }

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
          if (fresh) {
            document.getElementById("live").replaceWith(fresh);
            drawCharts();
          }
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

  drawCharts();
  var form = document.getElementById("sign-in");
  if (form) { signIn(form); }
  var button = document.getElementById("sign-out");
  if (button) { signOut(button); }
  if (document.body.dataset.live) { live(document.body); }
})();
