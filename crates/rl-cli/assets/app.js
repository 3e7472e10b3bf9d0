// rl's run pages: the list of runs (`/`) and one run (`/runs/{id}`), drawn from `/page/...`
// (read-only JSON). Every text from a run (events, logs, rollouts) goes into the page with
// textContent, never as HTML. Charts are uPlot's. While a run goes, the page asks for what is
// new every two seconds (the events after its cursor, the steps so far) and redraws.
"use strict";

(function () {
  const POLL_MS = 2000;
  const app = document.getElementById("app");

  const { el, num, fmt, age, clock, compact, money, sleep, getJson, showError, FINISHED, STEP_AXIS, stateBadge, table } = window.rl;

  // ------------------------------------------------------------------ the list of runs

  async function listPage() {
    document.title = "rl: runs";
    // The sweeps are an extra: a list that cannot read them still shows the runs.
    const [data, sweeps] = await Promise.all([getJson("/page/runs"), getJson("/page/sweeps").catch(() => null)]);
    const rows = data.runs.map((run) =>
      el("tr", { "data-run": run.run_id }, [
        el("td", {}, [el("a", { href: "/runs/" + run.run_id, text: run.run_id })]),
        el("td", {}, [stateBadge(run.state, run.phase)]),
        el("td", { text: environmentLabel(run.environment, run.environment_kind) }),
        el("td", { class: "number", text: run.step === null ? "–" : run.total_steps ? run.step + "/" + run.total_steps : String(run.step) }),
        el("td", { class: "number", text: fmt(num(run.reward_mean)) }),
        el("td", { class: "number", "data-tokens": "", text: run.usage ? compact(run.usage.tokens.trained) : "–", title: run.usage ? "prompt " + run.usage.tokens.prompt + ", sampled " + run.usage.tokens.sampled + ", trained " + run.usage.tokens.trained : "" }),
        el("td", { class: "number", text: !run.usage ? "–" : num(run.usage.cost) === null ? "no price" : money(run.usage.cost, run.usage.currency) }),
        el("td", { text: age(run.created_at), title: run.created_at }),
      ])
    );
    app.replaceChildren(
      el("header", {}, [el("h1", { text: "Runs" })]),
      data.runs.length === 0
        ? el("p", { class: "quiet", text: "No runs yet: start one with rl runs start." })
        : table(["run", "state", "environment", "step", "last reward", "trained tokens", "cost", "created"], rows),
      sweepsSection(sweeps)
    );
  }

  // An environment's name with its kind unless Atropos (every run before verifiers) or unknown,
  // as the terminal shows it.
  function environmentLabel(name, kind) {
    return kind && kind !== "atropos" ? name + " (" + kind + ")" : name;
  }

  // Each sweep, linked to its page: its runs started of its points.
  function sweepsSection(sweeps) {
    if (!sweeps || !sweeps.sweeps.length) return null;
    const rows = sweeps.sweeps.map((sweep) =>
      el("tr", { "data-sweep": sweep.sweep_id }, [
        el("td", {}, [el("a", { href: "/sweeps/" + sweep.sweep_id, text: sweep.sweep_id })]),
        el("td", {}, [stateBadge(sweep.state)]),
        el("td", { text: sweep.environment }),
        el("td", { class: "number", text: sweep.run_ids.length + "/" + sweep.points }),
        el("td", { class: "number", text: String(sweep.max_parallel) }),
        el("td", { text: age(sweep.created_at), title: sweep.created_at }),
      ])
    );
    return el("section", { id: "sweeps" }, [el("h2", { text: "Sweeps" }), table(["sweep", "state", "environment", "runs", "at once", "created"], rows)]);
  }

  // ------------------------------------------------------------------ one run

  // Evaluations come every few steps: their points are joined across the steps between.
  const sparse = (field) => field.startsWith("eval_");
  // The estimates whose 95% interval the evaluation logs: drawn as a band around this run's line.
  const INTERVALS = new Set(["eval_mean_score", "eval_pass_at_n", "eval_best_of_n"]);

  // A chart's title: its series' label, and the n a pass@n or best-of-n is of.
  const captioned = (field, label, n) => {
    if (n === null) return label;
    if (field === "eval_pass_at_n") return label + " (pass@" + n + ")";
    if (field === "eval_best_of_n") return label + " (best of " + n + ")";
    return label;
  };

  // A chart per series: uPlot, steps on x, this run (and the compared one) on y.
  class Charts {
    constructor(container, series) {
      this.container = container;
      this.series = series; // [{field, label}], in order
      this.charts = new Map();
      this.together = null;
    }

    update(history, other) {
      // pass@n and best-of-n are of the evaluation's n completions per prompt: their titles say it.
      const ns = history.map((row) => num(row.eval_n)).filter((v) => v !== null);
      const n = ns.length ? ns[ns.length - 1] : null;
      for (const { field, label } of this.series) {
        const mine = history.map((row) => num(row[field]));
        const theirs = other ? other.history.map((row) => num(row[field])) : null;
        if (!mine.some((v) => v !== null) && !(theirs && theirs.some((v) => v !== null))) continue;
        const data = aligned(history, mine, other ? other.history : null, theirs);
        if (INTERVALS.has(field)) {
          for (const bound of ["_low", "_high"]) {
            const values = new Map(history.map((row) => [row.step, num(row[field + bound])]));
            data.push(data[0].map((step) => (values.has(step) ? values.get(step) : null)));
          }
        }
        let chart = this.charts.get(field);
        if (!chart) {
          chart = this.create(field, label, other);
          this.charts.set(field, chart);
        }
        chart.box.setAttribute("data-points", String(mine.filter((v) => v !== null).length));
        chart.box.querySelector("figcaption").textContent = captioned(field, label, n);
        chart.plot.setData(data);
      }
      this.updateTogether(history);
    }

    // Every series of this run on one chart, each scaled to its own range (0 its lowest, 1 its
    // highest), to compare their shapes; the legend shows each one's real value and a click on
    // a name hides or shows it.
    updateTogether(history) {
      const shown = this.series.filter(({ field }) => history.some((row) => num(row[field]) !== null));
      if (shown.length < 2) return;
      const xs = history.map((row) => row.step);
      const raw = shown.map(({ field }) => history.map((row) => num(row[field])));
      const scaled = raw.map((values) => {
        const finite = values.filter((v) => v !== null);
        const low = Math.min(...finite);
        const high = Math.max(...finite);
        return values.map((v) => (v === null ? null : high > low ? (v - low) / (high - low) : 0.5));
      });
      if (!this.together || this.together.fields !== shown.map((s) => s.field).join()) {
        if (this.together) this.together.box.remove();
        const box = el("figure", { class: "chart wide", "data-series": "together" }, [el("figcaption", { text: "All series, each scaled to its range" })]);
        this.container.prepend(box);
        const colours = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#d97706", "#0891b2", "#db2777"];
        const plot = new uPlot(
          {
            width: Math.max(280, box.clientWidth - 16),
            height: 220,
            scales: { x: { time: false }, y: { range: [0, 1] } },
            axes: [STEP_AXIS, { values: (u, ticks) => ticks.map((t) => t.toFixed(1)) }],
            series: [{ label: "step" }].concat(
              shown.map(({ field, label }, i) => ({
                label: label,
                stroke: colours[i % colours.length],
                width: 2,
                spanGaps: sparse(field),
                value: (u, v, seriesIndex, index) => (index === null || index === undefined ? "–" : fmt(this.together.raw[seriesIndex - 1][index])),
              }))
            ),
            legend: { live: true },
            cursor: { sync: { key: "rl" } },
          },
          [xs].concat(scaled),
          box
        );
        this.together = { box: box, plot: plot, fields: shown.map((s) => s.field).join(), raw: raw };
      } else {
        this.together.raw = raw;
        this.together.plot.setData([xs].concat(scaled));
      }
    }

    create(field, label, other) {
      const box = el("figure", { class: "chart", "data-series": field }, [el("figcaption", { text: label })]);
      this.container.append(box);
      const gaps = sparse(field);
      const series = [{ label: "step" }, { label: "this run", stroke: "#2563eb", width: 2, spanGaps: gaps, points: { show: true, size: 4 } }];
      if (other) series.push({ label: "run " + other.run.id, stroke: "#d97706", width: 2, dash: [6, 4], spanGaps: gaps });
      const bands = [];
      if (INTERVALS.has(field)) {
        series.push({ label: "95% low", stroke: "#93c5fd", width: 1, dash: [2, 3], spanGaps: gaps });
        series.push({ label: "95% high", stroke: "#93c5fd", width: 1, dash: [2, 3], spanGaps: gaps });
        bands.push({ series: [series.length - 1, series.length - 2], fill: "rgba(37, 99, 235, 0.12)" });
      }
      box.setAttribute("data-bands", String(bands.length));
      const width = Math.max(260, box.clientWidth - 16);
      const plot = new uPlot(
        {
          width: width,
          height: 200,
          scales: { x: { time: false } },
          axes: [STEP_AXIS, {}],
          series: series,
          bands: bands,
          legend: { live: true },
          cursor: { sync: { key: "rl" } },
        },
        series.map(() => []),
        box
      );
      return { box: box, plot: plot };
    }
  }

  // Both runs' values on the union of their steps.
  function aligned(history, mine, otherHistory, theirs) {
    const steps = new Set(history.map((row) => row.step));
    if (otherHistory) otherHistory.forEach((row) => steps.add(row.step));
    const xs = [...steps].filter((s) => s !== null).sort((a, b) => a - b);
    const pick = (rows, values) => {
      const at = new Map(rows.map((row, i) => [row.step, values[i]]));
      return xs.map((x) => (at.has(x) ? at.get(x) : null));
    };
    const data = [xs, pick(history, mine)];
    if (otherHistory) data.push(pick(otherHistory, theirs));
    return data;
  }

  function runHeader(page) {
    const run = page.run;
    const step = page.history.length ? page.history[page.history.length - 1].step : null;
    const parts = [
      el("a", { href: "/", text: "← runs" }),
      el("h1", { text: "Run " + run.id }),
      el("p", { class: "meta" }, [
        stateBadge(run.state, run.phase),
        el("span", { text: run.environment }),
        run.environment_kind ? el("span", { id: "environment-kind", class: "kind", title: "the API the environment is written against", text: run.environment_kind }) : null,
        el("span", { id: "step", text: step === null ? "no step yet" : page.total_steps ? "step " + step + "/" + page.total_steps : "step " + step }),
        page.eta_secs !== null && !FINISHED.includes(run.state) ? el("span", { text: "ETA " + clock(page.eta_secs) }) : null,
      ]),
      lineageLine(run),
      algorithmLine(page.algorithm),
    ];
    if (run.error) parts.push(el("p", { class: "error", text: run.error }));
    return el("header", { id: "header" }, parts);
  }

  // Where the run comes from (its parent, the step, what a fork changed) and its sweep.
  const LINEAGE = { fork: "forked from ", extension: "extended from ", resume: "resumed from " };

  function lineageLine(run) {
    const from = run.resumed_from;
    if (!from && !run.sweep_id) return null;
    const parts = [];
    if (from) {
      const changes = Object.entries(from.changes || {}).map(([field, value]) => field + "=" + (typeof value === "string" ? value : JSON.stringify(value)));
      parts.push(
        el("span", { id: "lineage", "data-kind": from.kind }, [
          (LINEAGE[from.kind] || "continues "),
          el("a", { href: "/runs/" + from.run_id, text: "run " + from.run_id }),
          (from.kind === "fork" ? " at step " : " after step ") + from.step + (changes.length ? ": " + changes.join(", ") : ""),
        ])
      );
    }
    if (run.sweep_id) parts.push(el("span", { id: "sweep" }, ["part of ", el("a", { href: "/sweeps/" + run.sweep_id, text: "sweep " + run.sweep_id })]));
    return el("p", { class: "meta lineage" }, parts);
  }

  // The loss, advantages and truncation the run's config sets (issue 43), as rl words them.
  function algorithmLine(algorithm) {
    if (!algorithm) return null;
    return el("p", { class: "meta", id: "algorithm", "data-loss": algorithm.loss, text: "Algorithm: " + algorithm.summary });
  }

  // The environment's groups (rl_env's counts): made, with signal, how the rest scored.
  function groupsLine(groups) {
    if (!groups) return null;
    return el("p", { class: groups.no_signal ? "error" : "quiet", text: "Groups: " + groups.made + " made, " + groups.with_signal + " with signal (" + groups.summary + ")" });
  }

  function healthSection(health, groups) {
    const counts = groupsLine(groups);
    if (!health) return el("div", {}, [counts, el("p", { class: "quiet", text: "No steps yet." })]);
    if (health.healthy) return el("div", {}, [counts, el("p", { class: "good", text: "No warning sign in the last steps." })]);
    return el("div", {}, [
      counts,
      el(
        "ul",
        { class: "flags" },
        health.flags.map((flag) =>
          // A sign of the environment's groups (no_signal) judges no steps: its window is all 0.
          el("li", {}, [el("strong", { text: flag.kind }), el("span", { text: flag.window.rows === 0 ? ": " + flag.detail : " " + flag.metric + " (steps " + flag.window.first_step + "–" + flag.window.last_step + "): " + flag.detail })])
        )
      ),
    ]);
  }

  // ------------------------------------------------------------------ where time and money go

  // One colour per part of a step, in the order a step goes through them.
  const PART_COLOURS = {
    wait: "#cbd5e1",
    logprobs: "#0891b2",
    rollouts: "#16a34a",
    forward_backward: "#2563eb",
    optim: "#9333ea",
    save: "#d97706",
    sampler_update: "#db2777",
    eval: "#dc2626",
    other: "#78716c",
  };
  const SVG = "http://www.w3.org/2000/svg";

  function svg(tag, attributes, children) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, String(value));
    for (const child of children || []) node.append(child);
    return node;
  }

  // Totals, pace, each part's share and the cost, in one paragraph.
  function accountingLines(accounting) {
    if (!accounting) return [el("p", { class: "quiet", text: "This run's trainer logs no token totals." })];
    const t = accounting.tokens;
    const pace = num(accounting.throughput.trained_tokens_per_sec);
    const lines = [
      el("p", { id: "tokens", text: "Tokens: " + compact(t.prompt) + " prompt · " + compact(t.sampled) + " sampled · " + compact(t.trained) + " trained (to step " + accounting.step + ")" + (pace === null ? "" : "; pace " + compact(pace) + " trained/s") }),
    ];
    if (accounting.shares.length) {
      lines.push(el("p", { text: "Time: " + accounting.shares.map((s) => s.part + " " + Math.round(s.share * 100) + "%").join(" · ") + (accounting.bottleneck ? " — bottleneck: " + accounting.bottleneck.part : "") }));
    }
    const cost = accounting.cost;
    lines.push(
      cost
        ? el("p", { id: "cost", text: "Cost: " + money(num(cost.total), cost.currency) + " so far, " + money(num(cost.estimate_at_completion), cost.currency) + " estimated at completion" })
        : el("p", { id: "cost", class: "quiet", text: "Cost: " + (accounting.cost_note || "no price set") })
    );
    return lines;
  }

  // A stacked bar per step: each part's seconds, one colour per part, with a legend.
  function anatomyChart(anatomy) {
    const steps = anatomy.steps;
    if (!steps.length) return el("p", { class: "quiet", text: "No timed step yet." });
    const used = anatomy.parts.map((part, i) => steps.some((s) => s.secs[i] > 0));
    const width = 1100, height = 240, left = 48, bottom = 28, top = 8;
    // The axis ends at a round number above the longest step: 1, 2 or 5 times a power of ten,
    // in four ticks.
    const longest = Math.max(...steps.map((s) => s.secs.reduce((a, b) => a + b, 0)), 1e-9);
    const power = 10 ** Math.floor(Math.log10(longest / 4));
    const tickStep = [1, 2, 2.5, 5, 10].map((f) => f * power).find((t) => t * 4 >= longest);
    const highest = tickStep * 4;
    const slot = (width - left - 8) / steps.length;
    const bar = Math.max(1, Math.min(40, slot * 0.8));
    const y = (secs) => top + (height - top - bottom) * (1 - secs / highest);
    const nodes = [];
    for (let tick = 0; tick <= 4; tick++) {
      const secs = (highest * tick) / 4;
      nodes.push(svg("line", { x1: left, x2: width, y1: y(secs), y2: y(secs), class: "grid" }));
      const label = svg("text", { x: left - 6, y: y(secs) + 4, "text-anchor": "end", class: "axis" });
      label.textContent = fmt(Number(secs.toPrecision(4))) + " s";
      nodes.push(label);
    }
    const every = Math.max(1, Math.ceil(steps.length / 20));
    steps.forEach((step, index) => {
      const x = left + slot * index + (slot - bar) / 2;
      let base = 0;
      anatomy.parts.forEach((part, i) => {
        const secs = step.secs[i];
        if (!(secs > 0)) return;
        const rect = svg("rect", { x: x, width: bar, y: y(base + secs), height: Math.max(0.5, y(base) - y(base + secs)), fill: PART_COLOURS[part] || "#888", "data-part": part });
        const title = svg("title");
        title.textContent = "step " + step.step + ": " + part + " " + fmt(secs) + " s";
        rect.append(title);
        nodes.push(rect);
        base += secs;
      });
      if (index % every === 0) {
        const label = svg("text", { x: x + bar / 2, y: height - 10, "text-anchor": "middle", class: "axis" });
        label.textContent = String(step.step);
        nodes.push(label);
      }
    });
    const chart = svg("svg", { viewBox: "0 0 " + width + " " + height, class: "anatomy", role: "img", "aria-label": "seconds of each part of each step" }, nodes);
    const legend = el(
      "ul",
      { class: "legend" },
      anatomy.parts.filter((_, i) => used[i]).map((part) => {
        // Set through the CSSOM: the page's policy refuses style attributes.
        const swatch = el("span", { class: "swatch" });
        swatch.style.background = PART_COLOURS[part] || "#888";
        return el("li", { "data-part": part }, [swatch, el("span", { text: part })]);
      })
    );
    return el("figure", { class: "chart wide", "data-series": "anatomy", "data-steps": String(steps.length) }, [el("figcaption", { text: "Each step's seconds by part" }), chart, legend]);
  }

  // Tokens per second over the steps: trained and sampled.
  class Throughput {
    constructor(container) {
      this.container = container;
      this.plot = null;
    }

    update(anatomy) {
      const rows = anatomy.steps.filter((s) => num(s.trained_tokens_per_sec) !== null || num(s.sampled_tokens_per_sec) !== null);
      if (!rows.length) return;
      const data = [rows.map((s) => s.step), rows.map((s) => num(s.trained_tokens_per_sec)), rows.map((s) => num(s.sampled_tokens_per_sec))];
      if (!this.plot) {
        const box = el("figure", { class: "chart wide", "data-series": "throughput" }, [el("figcaption", { text: "Throughput (tokens per second)" })]);
        this.container.append(box);
        this.box = box;
        this.plot = new uPlot(
          {
            width: Math.max(280, box.clientWidth - 16),
            height: 200,
            scales: { x: { time: false } },
            axes: [STEP_AXIS, { values: (u, ticks) => ticks.map((t) => compact(t)) }],
            series: [
              { label: "step" },
              { label: "trained tokens/s", stroke: "#2563eb", width: 2, points: { show: true, size: 4 } },
              { label: "sampled tokens/s", stroke: "#16a34a", width: 2, points: { show: true, size: 4 } },
            ],
            legend: { live: true },
            cursor: { sync: { key: "rl" } },
          },
          data,
          box
        );
      } else {
        this.plot.setData(data);
      }
      this.box.setAttribute("data-points", String(rows.length));
    }
  }

  function checkpointsSection(checkpoints) {
    if (!checkpoints.length) return el("p", { class: "quiet", text: "No checkpoint saved yet." });
    return table(
      ["step", "name", "state saved", "size", "", "sampler path"],
      checkpoints.map((c) =>
        el("tr", {}, [
          el("td", { class: "number", text: c.step === null ? "" : String(c.step) }),
          el("td", { text: c.name || "" }),
          el("td", { text: c.state_path ? "yes" : "" }),
          el("td", { class: "number", text: c.size_bytes === null ? "" : (c.size_bytes / 1e6).toFixed(2) + " MB" }),
          el("td", { text: [c.best ? "best" : "", c.resume_point ? "resume point" : "", c.pruned ? "pruned" : ""].filter(Boolean).join(", ") }),
          el("td", { class: "path", text: c.sampler_path }),
        ])
      )
    );
  }

  function logsSection(logs) {
    return el(
      "div",
      {},
      logs.map((log) =>
        el("details", { "data-log": log.component }, [
          el("summary", { text: log.component + " (" + log.lines.length + " lines" + (log.truncated ? ", the end" : "") + ")" }),
          el("pre", { text: log.lines.join("\n") }),
        ])
      )
    );
  }

  class Timeline {
    constructor(container) {
      this.list = el("ol", { class: "timeline" });
      container.append(this.list);
    }

    add(events) {
      for (const event of events) {
        this.list.append(
          el("li", { "data-kind": event.kind }, [
            el("time", { text: event.at, datetime: event.at }),
            el("span", { class: "kind", text: event.kind }),
            el("span", { text: event.message }),
          ])
        );
      }
    }
  }

  class Rollouts {
    constructor(container, runId) {
      this.runId = runId;
      this.select = el("select", { id: "rollout-step", "aria-label": "step" });
      this.body = el("div", { id: "rollouts" });
      this.select.addEventListener("change", () => this.show(this.select.value));
      container.append(el("p", {}, [el("label", { text: "Step " }, [this.select])]), this.body);
      this.steps = [];
    }

    update(steps) {
      if (steps.length === this.steps.length) return;
      const chosen = this.select.value;
      this.steps = steps;
      this.select.replaceChildren(...steps.map((s) => el("option", { value: String(s), text: String(s) })));
      if (!steps.length) {
        this.body.replaceChildren(el("p", { class: "quiet", text: "This run kept no rollouts (keep_rollouts = 0, or no step yet)." }));
        return;
      }
      const step = chosen && steps.includes(Number(chosen)) ? chosen : String(steps[steps.length - 1]);
      this.select.value = step;
      if (step !== chosen) this.show(step);
    }

    async show(step) {
      try {
        const data = await getJson("/page/runs/" + this.runId + "/rollouts/" + encodeURIComponent(step));
        const notes = [];
        if (data.truncated) notes.push(el("p", { class: "quiet", text: "Cut at rl's bounds: not every row or character is shown." }));
        data.warnings.forEach((w) => notes.push(el("p", { class: "quiet", text: w })));
        // Rows that carry their conversation (a verifiers environment's, or any that sends
        // messages) are shown turn by turn; the others as the decoded prompt and completion.
        if (data.rows.some((row) => Array.isArray(row.messages))) {
          this.body.replaceChildren(...notes, conversationTable(data.rows));
          return;
        }
        const rows = data.rows.map((row) =>
          el("tr", { class: row.skipped ? "skipped" : "" }, [
            el("td", { class: "number", text: row.group === null ? "" : String(row.group) }),
            el("td", { class: "number", text: row.index === null ? "" : String(row.index) }),
            el("td", {}, [el("pre", { class: "prompt", text: row.prompt === null ? "" : row.prompt })]),
            el("td", {}, [el("pre", { class: "completion", text: row.completion === null ? "" : row.completion })]),
            el("td", { class: "number", text: fmt(num(row.score)) }),
            el("td", { class: "number", text: fmt(num(row.advantage)) }),
            el("td", { text: row.skipped ? "skipped" + (row.skip_reason ? ": " + row.skip_reason : "") : "" }),
          ])
        );
        this.body.replaceChildren(...notes, table(["group", "#", "prompt", "completion", "score", "advantage", ""], rows));
      } catch (error) {
        this.body.replaceChildren(el("p", { class: "error", text: String(error.message || error) }));
      }
    }
  }

  // A step's rows with their conversations: each row's turns labelled by role, an assistant's
  // tool calls and a tool's result named; the decoded tokens (what trains) one click away.
  function conversationTable(rows) {
    const skipText = (row) => (row.skipped ? "skipped" + (row.skip_reason ? ": " + row.skip_reason : "") : "");
    const decoded = (row) =>
      row.prompt === null && row.completion === null
        ? null
        : el("details", { class: "decoded" }, [
            el("summary", { text: "as tokens (what trains)" }),
            el("pre", { class: "prompt", text: row.prompt === null ? "" : row.prompt }),
            el("pre", { class: "completion", text: row.completion === null ? "" : row.completion }),
          ]);
    const body = rows.map((row) =>
      el("tr", { class: row.skipped ? "skipped" : "" }, [
        el("td", { class: "number", text: row.group === null ? "" : String(row.group) }),
        el("td", { class: "number", text: row.index === null ? "" : String(row.index) }),
        el("td", { class: "number", text: row.rollout === undefined || row.rollout === null ? "" : String(row.rollout) }),
        el(
          "td",
          {},
          Array.isArray(row.messages)
            ? [conversation(row.messages), decoded(row)]
            : [el("pre", { class: "prompt", text: row.prompt === null ? "" : row.prompt }), el("pre", { class: "completion", text: row.completion === null ? "" : row.completion })]
        ),
        el("td", { class: "number", text: fmt(num(row.score)) }),
        el("td", { class: "number", text: fmt(num(row.advantage)) }),
        el("td", { text: skipText(row) }),
      ])
    );
    return table(["group", "#", "rollout", "conversation", "score", "advantage", ""], body);
  }

  function conversation(messages) {
    return el(
      "div",
      { class: "conversation" },
      messages.map((message) => {
        const role = String(message.role);
        const about = [];
        if (message.name) about.push(message.name);
        if (message.tool_call_id) about.push("→ " + message.tool_call_id);
        return el("div", { class: "turn", "data-role": role }, [
          el("div", { class: "role" }, [el("span", { class: "who", text: role }), about.length ? el("span", { text: " · " + about.join(" · ") }) : null]),
          message.reasoning ? el("details", { class: "reasoning" }, [el("summary", { text: "reasoning" }), el("pre", { text: message.reasoning })]) : null,
          message.content !== "" || !(message.tool_calls || []).length ? el("pre", { class: "content", text: message.content }) : null,
          ...(message.tool_calls || []).map((call) =>
            el("div", { class: "tool-call" }, [
              el("span", { class: "call", text: "calls " + call.name + (call.id ? " (" + call.id + ")" : "") }),
              el("pre", { class: "arguments", text: call.arguments }),
            ])
          ),
        ]);
      })
    );
  }

  // The run to overlay, if `?compare=` names one: an extra, never needed to draw the page. A
  // run that does not exist (junk, deleted) is said beside the form, and the page drawn without.
  async function comparedRun(compareId) {
    if (!compareId) return { other: null, problem: null };
    try {
      const other = await getJson("/page/runs/" + encodeURIComponent(compareId) + "?since=" + Number.MAX_SAFE_INTEGER);
      return { other: other, problem: null };
    } catch (error) {
      return { other: null, problem: "Not overlaid: run " + compareId + ": " + String(error.message || error) };
    }
  }

  async function runPage(runId) {
    const compareId = new URLSearchParams(location.search).get("compare");
    let page = await getJson("/page/runs/" + runId + "?since=0");
    const { other, problem } = await comparedRun(compareId);
    document.title = "rl: run " + runId;

    const chartsBox = el("div", { class: "charts", id: "charts" });
    const timelineBox = el("section", {}, [el("h2", { text: "Timeline" })]);
    const rolloutsBox = el("section", {}, [el("h2", { text: "Rollouts" })]);
    const healthBox = el("div", { id: "health" });
    const accountingBox = el("div", { id: "accounting" });
    const anatomyBox = el("div", { class: "charts", id: "anatomy" });
    const throughputBox = el("div", { class: "charts", id: "throughput" });
    const checkpointsBox = el("div", { id: "checkpoints" });
    const logsBox = el("div", { id: "logs" });
    const compareForm = el("form", { class: "compare", action: "/runs/" + runId, method: "get" }, [
      el("label", { text: "Overlay run " }, [el("input", { name: "compare", value: compareId || "", placeholder: "run id", size: "10", pattern: "[0-9a-f]{8}" })]),
      el("button", { type: "submit", text: "Compare" }),
      problem ? el("span", { id: "compare-problem", class: "error", text: problem }) : null,
    ]);
    app.replaceChildren(
      runHeader(page),
      el("section", {}, [el("h2", { text: "Curves" }), compareForm, chartsBox]),
      el("section", {}, [el("h2", { text: "Health" }), healthBox]),
      el("section", {}, [el("h2", { text: "Time and cost" }), accountingBox, anatomyBox, throughputBox]),
      timelineBox,
      rolloutsBox,
      el("section", {}, [el("h2", { text: "Checkpoints" }), checkpointsBox]),
      el("section", {}, [el("h2", { text: "Logs" }), logsBox])
    );

    const charts = new Charts(chartsBox, page.series);
    const timeline = new Timeline(timelineBox);
    const rollouts = new Rollouts(rolloutsBox, runId);
    const throughput = new Throughput(throughputBox);
    let cursor = 0;

    function draw(page) {
      document.getElementById("header").replaceWith(runHeader(page));
      charts.update(page.history, other);
      if (!chartsBox.children.length) chartsBox.replaceChildren(el("p", { class: "quiet", text: "No step logged yet." }));
      else chartsBox.querySelectorAll("p.quiet").forEach((p) => p.remove());
      timeline.add(page.run.events);
      cursor = page.run.next_since;
      healthBox.replaceChildren(healthSection(page.health, page.groups));
      accountingBox.replaceChildren(...accountingLines(page.accounting));
      anatomyBox.replaceChildren(anatomyChart(page.anatomy));
      throughput.update(page.anatomy);
      checkpointsBox.replaceChildren(checkpointsSection(page.checkpoints));
      const open = new Set([...logsBox.querySelectorAll("details[open]")].map((d) => d.getAttribute("data-log")));
      logsBox.replaceChildren(logsSection(page.logs));
      logsBox.querySelectorAll("details").forEach((d) => {
        if (open.has(d.getAttribute("data-log"))) d.open = true;
      });
      rollouts.update(page.rollout_steps);
      app.setAttribute("data-state", page.run.state);
    }

    draw(page);
    while (!FINISHED.includes(page.run.state)) {
      await sleep(POLL_MS);
      try {
        page = await getJson("/page/runs/" + runId + "?since=" + cursor);
        draw(page);
        document.getElementById("error")?.remove();
      } catch (error) {
        showError(error);
      }
    }
  }

  const kind = app.getAttribute("data-page");
  window.rl.run(kind === "run" ? runPage(app.getAttribute("data-run")) : listPage());
  // A live page is ready once drawn, not when the run ends.
  if (kind === "run") {
    const mark = () => (document.getElementById("charts") ? app.setAttribute("data-drawn", "true") : setTimeout(mark, 50));
    mark();
  }
})();
