// The helpers every rl page shares (the run pages' `app.js`, the sweep page's `sweep.js`):
// building elements (text always as text, never as HTML), numbers as the terminal shows them,
// reading `/page/...` with patience for a busy server. Loaded first; they are `window.rl`.
"use strict";

(function () {
  const app = document.getElementById("app");

  function el(tag, attributes, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children || []) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  // WandB's spelling of the non-finite numbers, as the answers carry them, read as gaps.
  function num(value) {
    return typeof value === "number" && Number.isFinite(value) ? value : null;
  }

  // 4 significant digits, as the terminal shows them.
  function fmt(value) {
    if (value === null || value === undefined) return "–";
    if (typeof value !== "number") return String(value);
    if (value === 0) return "0";
    const magnitude = Math.floor(Math.log10(Math.abs(value)));
    if (magnitude < -4 || magnitude >= 15) return value.toExponential(3);
    if (magnitude >= 3) return String(Math.round(value / 10 ** (magnitude - 3)) * 10 ** (magnitude - 3));
    return String(Number(value.toFixed(3 - magnitude)));
  }

  function age(time) {
    const seconds = (Date.now() - Date.parse(time)) / 1000;
    if (!Number.isFinite(seconds)) return "";
    if (seconds < 90) return Math.round(seconds) + " s ago";
    if (seconds < 5400) return Math.round(seconds / 60) + " min ago";
    if (seconds < 129600) return Math.round(seconds / 3600) + " h ago";
    return Math.round(seconds / 86400) + " days ago";
  }

  function clock(seconds) {
    const total = Math.max(0, Math.round(seconds));
    const h = Math.floor(total / 3600);
    const m = Math.floor(total / 60) % 60;
    const s = String(total % 60).padStart(2, "0");
    return h > 0 ? h + ":" + String(m).padStart(2, "0") + ":" + s : m + ":" + s;
  }

  // A count as people read it: 950, 12.3k, 4.5M.
  function compact(count) {
    if (count === null || count === undefined) return "–";
    const units = [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [size, unit] of units) if (Math.abs(count) >= size) return (count / size).toFixed(1) + unit;
    return String(Math.round(count));
  }

  function money(amount, currency) {
    return amount === null || amount === undefined ? "–" : amount.toFixed(2) + (currency ? " " + currency : "");
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // A busy server (503) says when to ask again (Retry-After): asked again that many times
  // before its refusal is shown.
  const BUSY_RETRIES = 5;

  async function getJson(path) {
    for (let retries = BUSY_RETRIES; ; retries--) {
      const response = await fetch(path, { headers: { Accept: "application/json" } });
      if (response.status === 503 && retries > 0) {
        const seconds = Number(response.headers.get("Retry-After"));
        await sleep(1000 * (Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, 30) : 1));
        continue;
      }
      const body = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(body.error || response.status + " " + response.statusText);
      return body;
    }
  }

  function showError(error) {
    const box = document.getElementById("error") || el("p", { id: "error", class: "error" });
    box.textContent = String(error.message || error);
    app.prepend(box);
  }

  // A capped run ended before a step that would pass its cost, tokens or hours.
  const FINISHED = ["stopped", "completed", "failed", "lost", "capped"];
  // Steps are whole: ticks only at whole steps.
  const STEP_AXIS = { label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] };

  function stateBadge(state, phase) {
    return el("span", { class: "state state-" + state, text: phase ? state + ": " + phase : state });
  }

  function table(headings, rows) {
    return el("table", {}, [
      el("thead", {}, [el("tr", {}, headings.map((h) => el("th", { text: h })))]),
      el("tbody", {}, rows),
    ]);
  }

  // A page's end: ready once its first drawing is done (or its error shown). A live page sets
  // `data-drawn` itself, as it keeps going after it is drawn.
  function run(done) {
    done
      .then(() => app.setAttribute("data-ready", "true"))
      .catch((error) => {
        showError(error);
        app.setAttribute("data-ready", "error");
      });
  }

  window.rl = Object.freeze({
    app, el, num, fmt, age, clock, compact, money, sleep, getJson, showError, FINISHED, STEP_AXIS, stateBadge, table, run,
  });
})();
