/* kvreplay sweep page: the objective against each swept parameter and the Pareto front of TTFT
   against cost, drawn from the page's data section by plots.js (inlined before this script);
   and the results table sorted by clicking a header. */
(function (P) {
  "use strict";
  var D = P.DATA, fmt = P.fmt, color = P.color;
  var GOAL = D.objective.figure, LOWER = D.objective.sense === "minimize";
  var BEST = D.best.point;
  var several = D.traces.length > 1;

  function none() { return null; }

  // A points-only series: filled when the points meet the SLA, hollow when they miss it.
  function dots(label, r, filled) {
    return { label: label, stroke: color(r), paths: none, value: function (u, v) { return fmt(v); },
             markerFill: filled ? color(r) : "#fff",
             points: { show: true, size: 9, width: 2, stroke: color(r), fill: filled ? color(r) : "#fff" } };
  }

  function ring(label) {
    return { label: label, stroke: "#111", paths: none, value: function (u, v) { return fmt(v); },
             points: { show: true, size: 18, width: 2, stroke: "#111", fill: "rgba(0,0,0,0)" } };
  }

  // Room for a marker (and its ring) at either end.
  function spread(u, lo, hi) {
    var pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.1 || 1;
    return [lo - pad, hi + pad];
  }

  // A log scale when the values span more than a decade or so (queueing makes TTFT do that).
  function scale(vs) {
    vs = vs.filter(function (v) { return v != null; });
    var lo = Math.min.apply(null, vs), hi = Math.max.apply(null, vs);
    return lo > 0 && hi / lo >= 20 ? { time: false, distr: 3, log: 10 } : { time: false, range: spread };
  }

  // A swept number's axis: ticks at the swept values when there are few of them.
  function numberAxes(xs, xLabel, yLabel) {
    var ax = P.axes(xLabel, yLabel);
    var values = xs.filter(function (v, k) { return k === 0 || v !== xs[k - 1]; });
    if (values.length <= 12) ax[0].splits = function () { return values; };
    return ax;
  }

  function traceName(t, what) { return several ? D.traces[t] + ": " + what : what; }

  // Series with at least one value (an empty one would only clutter the legend).
  function keep(data, series, ys, s) {
    if (ys.some(function (v) { return v != null; })) { data.push(ys); series.push(s); }
  }

  function objectiveChart(i) {
    var axis = D.axes[i], names = axis.categories;
    var rows = D.rows.filter(function (r) { return r.status === "ok" && r.figures[GOAL] != null && r.x[i] != null; });
    rows.sort(function (a, b) { return a.x[i] - b.x[i] || a.point - b.point || (a.trace || 0) - (b.trace || 0); });
    var xs = rows.map(function (r) { return r.x[i]; }), all = rows.map(function (r) { return r.figures[GOAL]; });
    var xSeries = { label: axis.name, value: function (u, v) { return v == null ? "" : names ? names[v] : fmt(v); } };
    var data = [xs], series = [xSeries];
    var traces = several ? D.traces.map(function (n, t) { return t; }) : [0];
    traces.forEach(function (t) {
      function pick(ok) {
        return rows.map(function (r) { return (r.trace || 0) === t && !!r.sla_ok === ok ? r.figures[GOAL] : null; });
      }
      keep(data, series, pick(true), dots(traceName(t, D.sla.length ? "meets SLA" : "points"), t, true));
      keep(data, series, pick(false), dots(traceName(t, "misses SLA"), t, false));
      // The best value meeting the SLA at each x, at the index of the row that has it.
      var at = {};
      rows.forEach(function (r, k) {
        if ((r.trace || 0) !== t || !r.sla_ok) return;
        var y = r.figures[GOAL], seen = at[r.x[i]];
        if (seen === undefined || (LOWER ? y < all[seen] : y > all[seen])) at[r.x[i]] = k;
      });
      var line = rows.map(function () { return null; });
      Object.keys(at).forEach(function (x) { line[at[x]] = all[at[x]]; });
      keep(data, series, line, P.line(traceName(t, D.sla.length ? "best meeting the SLA" : "best at each value"), t, 1));
    });
    keep(data, series, rows.map(function (r) { return r.point === BEST ? r.figures[GOAL] : null; }), ring("best point"));
    var ax = names ? P.categoryAxes(names, axis.path, GOAL) : numberAxes(xs, axis.path, GOAL);
    return { data: data, series: series, axes: ax,
             scales: { x: names ? P.categoryScale(names) : scale(xs), y: scale(all) } };
  }

  function paretoChart() {
    var p = D.pareto, pts = p.points;
    var xs = pts.map(function (q) { return q.x; }), all = pts.map(function (q) { return q.y; });
    function pick(f) { return pts.map(function (q) { return f(q) ? q.y : null; }); }
    var data = [xs], series = [{ label: p.x, value: function (u, v) { return fmt(v); } }];
    keep(data, series, pick(function (q) { return q.sla_ok; }), dots(D.sla.length ? "meets SLA" : "points", 0, true));
    keep(data, series, pick(function (q) { return !q.sla_ok; }), dots("misses SLA", 0, false));
    keep(data, series, pick(function (q) { return q.front; }),
         P.line("Pareto front", 0, 0, { points: { show: true, size: 5, stroke: color(0), fill: color(0) } }));
    if (p.bound != null) keep(data, series, pts.map(function () { return p.bound; }), { label: "SLA bound", stroke: "#9aa3ab", width: 1.2, dash: [5, 4], points: { show: false }, "class": "kv-line" });
    keep(data, series, pick(function (q) { return q.point === BEST; }), ring("best point"));
    return { data: data, series: series, axes: P.axes(p.x + " (cost)", p.y),
             scales: { x: scale(xs), y: scale(all.concat(p.bound != null ? [p.bound] : [])) } };
  }

  var CHARTS = { pareto: paretoChart };
  D.axes.forEach(function (a, i) { CHARTS["param-" + i] = function () { return objectiveChart(i); }; });
  P.draw(CHARTS);

  // A results table wider than the page scrolls inside it: say so, and shade the edge.
  function scrollCue() {
    document.querySelectorAll(".wide").forEach(function (box) {
      var scrolls = box.scrollWidth > box.clientWidth + 1;
      box.classList.toggle("scrolls", scrolls);
      var note = box.nextElementSibling;
      if (note && note.classList.contains("scroll-note")) note.hidden = !scrolls;
    });
  }
  scrollCue();
  window.addEventListener("resize", scrollCue);

  // Sorting: numbers as numbers, text as text, empty cells last; a second click reverses.
  function key(td) {
    var v = td.getAttribute("data-v");
    return v === "" || isNaN(Number(v)) ? v : Number(v);
  }
  function compare(a, b) {
    if (a === "" || b === "") return (a === "") - (b === "");
    if (typeof a === typeof b) return a < b ? -1 : a > b ? 1 : 0;
    return typeof a === "number" ? -1 : 1;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var up = th.getAttribute("aria-sort") !== "ascending";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        rows.map(function (tr, n) { return [key(tr.cells[col]), n, tr]; })
          .sort(function (a, b) {
            var c = compare(a[0], b[0]);
            if (a[0] !== "" && b[0] !== "" && !up) c = -c;
            return c || a[1] - b[1];
          })
          .forEach(function (e) { body.appendChild(e[2]); });
      });
    });
  });
})(kvreplayPlots);
