/* kvreplay HTML pages: what every page's charts share (the data section, colours, number
   formats, axes, category ticks) and the drawing of each `.plot[data-chart]` element with uPlot
   (inlined before this script). The page's own script names its charts and calls draw(). No
   network: everything the page needs is in the file. */
var kvreplayPlots = (function () {
  "use strict";
  var started = performance.now();
  var DATA = JSON.parse(document.getElementById("kvreplay-data").textContent);
  var COLORS = ["#1f6fb4", "#d1495b", "#2a9d4b", "#7b4fb0", "#e08a1e", "#5b6770"];
  var DASH = [[], [7, 4], [2, 3]];

  function color(i) { return COLORS[i % COLORS.length]; }

  function fmt(v) {
    if (v == null || !isFinite(v)) return "–";
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + "M";
    if (a >= 1e4) return (v / 1e3).toPrecision(3) + "k";
    if (a >= 100) return v.toFixed(0);
    return String(+v.toPrecision(3));
  }

  function ticks(u, splits) { return splits.map(fmt); }

  // Room on both sides, so that a jump at the first or last sample is not drawn on the frame.
  function padded(u, lo, hi) {
    var pad = (hi - lo) * 0.03 || Math.abs(hi) * 0.05 || 1;
    return [lo - pad, hi + pad];
  }

  // A line series for run `r`; `style` picks the dash (0 solid, 1 dashed, 2 dotted).
  function line(label, r, style, extra) {
    var s = { label: label, stroke: color(r), width: 1.6, dash: DASH[style || 0],
              spanGaps: true, points: { show: false }, value: function (u, v) { return fmt(v); } };
    for (var k in extra || {}) s[k] = extra[k];
    return s;
  }

  function axes(xLabel, yLabel, xValues) {
    return [
      { label: xLabel, values: xValues || ticks, stroke: "#444", grid: { stroke: "#eee" } },
      { label: yLabel, values: ticks, size: 56, stroke: "#444", grid: { stroke: "#eee" } }
    ];
  }

  // Axes for an x of category indices 0..n-1: the names as ticks, thinned to fit, no grid.
  function categoryAxes(names, xLabel, yLabel) {
    var longest = names.reduce(function (m, t) { return Math.max(m, t.length); }, 1);
    var every = Math.max(1, Math.ceil(names.length * (longest * 7 + 14) / 520));
    var ax = axes(xLabel, yLabel, function (u, splits) {
      return splits.map(function (v) { return Number.isInteger(v) && v % every === 0 ? names[v] : ""; });
    });
    ax[0].splits = function () {
      return names.map(function (n, i) { return i; }).filter(function (i) { return i % every === 0; });
    };
    ax[0].grid = { show: false };
    return ax;
  }

  function categoryScale(names) { return { time: false, range: [-0.5, names.length - 0.5] }; }

  // Draws every chart of the page: `charts` maps a data-chart id to a function giving the
  // uPlot series, axes, scales and data. window.kvreplayCharts tells a test how many points
  // each chart plotted (false: it failed, and the error is logged).
  function draw(charts) {
    var plots = [], drawn = {};
    document.querySelectorAll(".plot[data-chart]").forEach(function (el) {
      var id = el.getAttribute("data-chart");
      try {
        var spec = charts[id]();
        var opts = { width: Math.max(el.clientWidth, 280), height: 250, series: spec.series,
                     axes: spec.axes, scales: spec.scales, legend: { live: true },
                     cursor: { drag: { x: true, y: false } } };
        plots.push([el, new uPlot(opts, spec.data, el)]);
        drawn[id] = spec.data.slice(1).reduce(function (n, ys) {
          return n + ys.filter(function (v) { return v != null; }).length;
        }, 0);
      } catch (err) {
        drawn[id] = false;
        el.textContent = "could not draw this chart: " + err;
        console.error("kvreplay chart " + id + ": " + err);
      }
    });
    window.addEventListener("resize", function () {
      plots.forEach(function (p) { p[1].setSize({ width: Math.max(p[0].clientWidth, 280), height: 250 }); });
    });
    window.kvreplayCharts = drawn;
    window.kvreplayDrawMs = performance.now() - started;  // parse + draw, for measurements
    document.body.setAttribute("data-rendered", "1");
  }

  return { DATA: DATA, color: color, fmt: fmt, ticks: ticks, padded: padded, line: line,
           axes: axes, categoryAxes: categoryAxes, categoryScale: categoryScale, draw: draw };
})();
