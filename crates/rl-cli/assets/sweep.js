// rl's sweep page (`/sweeps/{id}`), drawn from `/page/sweeps/{id}` (read-only JSON): the runs'
// curves overlaid, one series per run, each coloured by its point's settings, and the sweep's
// table, best first. While the sweep runs, the page reads it again every few seconds. Texts
// (settings, errors) go into the page as text, never as HTML. Helpers are `common.js`'s.
"use strict";

(function () {
  const POLL_MS = 3000;
  const { app, el, num, fmt, age, compact, money, sleep, getJson, showError, STEP_AXIS, stateBadge, table } = window.rl;

  // A setting's value as a person writes it back: `learning_rate=0.0003`.
  const spelled = (value) => (typeof value === "string" ? value : JSON.stringify(value));
  const settingsText = (settings) =>
    Object.entries(settings || {})
      .map(([field, value]) => field + "=" + spelled(value))
      .join(", ");

  // The grid holds the values as the caller wrote them ("1e-4"), a point's settings as checked
  // (0.0001): the same value when they read as the same number or text.
  function same(asked, checked) {
    if (JSON.stringify(asked) === JSON.stringify(checked)) return true;
    const a = Number(asked);
    const b = Number(checked);
    if (asked !== "" && checked !== "" && Number.isFinite(a) && Number.isFinite(b)) return a === b;
    return String(asked) === String(checked);
  }

  // A run's colour from its point: the hue by its value of the grid's first setting, the
  // lightness by its value of the second, so runs that share a value look alike and a glance
  // at the chart reads the grid. A third setting and more are told apart by the dash.
  function colourOf(grid, settings) {
    const place = (axis) => {
      if (!axis) return { at: 0, of: 1 };
      const at = axis.values.findIndex((value) => same(value, settings[axis.field]));
      return { at: Math.max(0, at), of: Math.max(1, axis.values.length) };
    };
    const first = place(grid[0]);
    const second = place(grid[1]);
    // Evenly round the wheel, starting at blue; the lightness from dark to light.
    const hue = Math.round((215 + (360 * first.at) / first.of) % 360);
    const lightness = second.of > 1 ? Math.round(30 + (30 * second.at) / (second.of - 1)) : 45;
    let dash = null;
    const rest = grid.slice(2).reduce((index, axis) => index * axis.values.length + place(axis).at, 0);
    if (rest > 0) dash = [2 + 4 * rest, 4];
    return { stroke: "hsl(" + hue + ", 75%, " + lightness + "%)", dash: dash };
  }

  // Every run's values on the union of their steps.
  function overlaid(curves, field) {
    const steps = new Set();
    curves.forEach((curve) => curve.steps.forEach((step) => steps.add(step)));
    const xs = [...steps].sort((a, b) => a - b);
    const columns = curves.map((curve) => {
      const at = new Map(curve.steps.map((step, i) => [step, num(curve[field][i])]));
      return xs.map((x) => (at.has(x) ? at.get(x) : null));
    });
    return [xs].concat(columns);
  }

  // One chart of a figure (reward or the metric) of every run, rebuilt when the runs change.
  class Overlay {
    constructor(container, field, caption) {
      this.container = container;
      this.field = field;
      this.caption = caption;
      this.plot = null;
      this.runs = "";
    }

    update(sweep, curves) {
      const data = overlaid(curves, this.field);
      const drawn = curves.filter((curve) => curve[this.field].some((v) => num(v) !== null));
      const runs = curves.map((curve) => curve.run_id).join();
      if (!drawn.length) {
        if (this.box) this.box.remove();
        this.plot = this.box = null;
        this.runs = "";
        return;
      }
      if (this.plot && this.runs === runs) {
        this.plot.setData(data);
      } else {
        if (this.box) this.box.remove();
        this.box = el("figure", { class: "chart wide", "data-series": this.field }, [el("figcaption", { text: this.caption })]);
        this.container.append(this.box);
        this.plot = new uPlot(
          {
            width: Math.max(280, this.box.clientWidth - 16),
            height: 260,
            scales: { x: { time: false } },
            axes: [STEP_AXIS, {}],
            series: [{ label: "step" }].concat(
              curves.map((curve) => {
                const colour = colourOf(sweep.grid, curve.settings);
                const series = { label: settingsText(curve.settings) + " (" + curve.run_id + ")", stroke: colour.stroke, width: 2, spanGaps: true, points: { show: true, size: 4 } };
                if (colour.dash) series.dash = colour.dash;
                return series;
              })
            ),
            legend: { live: true },
            cursor: { sync: { key: "rl-sweep" } },
          },
          data,
          this.box
        );
        this.runs = runs;
      }
      this.box.setAttribute("data-runs", String(drawn.length));
    }
  }

  function sweepHeader(sweep) {
    const metric = sweep.metric.name === "held_out" ? "the held-out score" : sweep.metric.name;
    return el("header", { id: "header" }, [
      el("a", { href: "/", text: "← runs" }),
      el("h1", { text: "Sweep " + sweep.sweep_id }),
      el("p", { class: "meta" }, [
        stateBadge(sweep.state),
        el("span", { text: sweep.environment }),
        el("span", { id: "progress", text: sweep.started + " of " + sweep.points + " runs started" + (sweep.waiting ? ", " + sweep.waiting + " waiting" : "") + ", at most " + sweep.max_parallel + " at once" }),
        el("span", { text: "ranked by " + metric + (sweep.metric.lower_is_better ? " (lower is better)" : " (higher is better)") }),
        el("span", { text: "started " + age(sweep.created_at), title: sweep.created_at }),
      ]),
      el("p", { class: "quiet", text: "Grid: " + sweep.grid.map((axis) => axis.field + " ∈ {" + axis.values.map(spelled).join(", ") + "}").join(" × ") }),
    ]);
  }

  function swatch(colour) {
    // Set through the CSSOM: the page's policy refuses style attributes.
    const node = el("span", { class: "swatch" });
    node.style.background = colour;
    return node;
  }

  function heldOut(score) {
    if (!score) return "–";
    const interval = num(score.low) !== null && num(score.high) !== null ? " [" + fmt(score.low) + ", " + fmt(score.high) + "]" : "";
    return fmt(num(score.mean_score)) + interval + " @ " + score.step;
  }

  function sweepTable(sweep) {
    const rows = sweep.rows.map((row) =>
      el("tr", { "data-point": String(row.point), class: row.best ? "best" : "" }, [
        el("td", { class: "number", text: row.rank === null || row.rank === undefined ? "–" : String(row.rank) }),
        el("td", { class: "settings" }, [swatch(colourOf(sweep.grid, row.settings).stroke), el("span", { text: settingsText(row.settings) })]),
        el("td", {}, [row.run_id ? el("a", { href: "/runs/" + row.run_id, text: row.run_id }) : el("span", { class: "quiet", text: "–" })]),
        el("td", {}, [stateBadge(row.state), row.error ? el("div", { class: "error", text: row.error }) : null]),
        el("td", { class: "number", text: row.step === null || row.step === undefined ? "–" : String(row.step) }),
        el("td", { class: "number", "data-metric": "", text: fmt(num(row.metric)) }),
        el("td", { class: "number", text: heldOut(row.held_out) }),
        el("td", { class: "number", text: row.usage ? compact(row.usage.tokens.trained) : "–", title: row.usage ? "prompt " + row.usage.tokens.prompt + ", sampled " + row.usage.tokens.sampled + ", trained " + row.usage.tokens.trained : "" }),
        el("td", { class: "number", text: !row.usage ? "–" : num(row.usage.cost) === null ? "no price" : money(row.usage.cost, row.usage.currency) }),
        el("td", { text: row.best ? "★ best" : "" }),
      ])
    );
    const metric = sweep.metric.name === "held_out" ? "held-out" : sweep.metric.name;
    return table(["rank", "settings", "run", "state", "step", metric, "held-out score [95%]", "trained tokens", "cost", ""], rows);
  }

  async function sweepPage(sweepId) {
    const path = "/page/sweeps/" + encodeURIComponent(sweepId);
    let page = await getJson(path);
    document.title = "rl: sweep " + sweepId;
    const chartsBox = el("div", { class: "charts", id: "charts" });
    const tableBox = el("div", { id: "table" });
    app.replaceChildren(
      sweepHeader(page.sweep),
      el("section", {}, [el("h2", { text: "Curves" }), chartsBox]),
      el("section", {}, [el("h2", { text: "Runs, best first" }), tableBox])
    );
    const reward = new Overlay(chartsBox, "reward", "reward/mean by step");
    // The sweep's own metric when it ranks by another figure than the reward.
    const metric = page.sweep.metric.name === "reward" ? null : new Overlay(chartsBox, "metric", page.sweep.metric.name + " by step" + (page.sweep.metric.lower_is_better ? " (lower is better)" : ""));

    function draw(page) {
      document.getElementById("header").replaceWith(sweepHeader(page.sweep));
      reward.update(page.sweep, page.curves);
      if (metric) metric.update(page.sweep, page.curves);
      chartsBox.querySelectorAll("p.quiet").forEach((p) => p.remove());
      if (!chartsBox.children.length) chartsBox.append(el("p", { class: "quiet", text: "No run has logged a step yet." }));
      tableBox.replaceChildren(sweepTable(page.sweep));
      app.setAttribute("data-state", page.sweep.state);
      app.setAttribute("data-drawn", "true");
    }

    draw(page);
    while (page.sweep.state === "running") {
      await sleep(POLL_MS);
      try {
        page = await getJson(path);
        draw(page);
        document.getElementById("error")?.remove();
      } catch (error) {
        showError(error);
      }
    }
  }

  window.rl.run(sweepPage(app.getAttribute("data-sweep")));
})();
