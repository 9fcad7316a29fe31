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

  // Tick labels; a split uPlot leaves unlabelled (a log axis's 2,000 ... 9,000) stays blank,
  // not the dash that stands for a missing value in the legend.
  function ticks(u, splits) { return splits.map(function (v) { return v == null ? "" : fmt(v); }); }

  // Room on both sides, so that a jump at the first or last sample is not drawn on the frame.
  function padded(u, lo, hi) {
    var pad = (hi - lo) * 0.03 || Math.abs(hi) * 0.05 || 1;
    return [lo - pad, hi + pad];
  }

  // A line series in colour `r`; `style` picks the dash (0 solid, 1 dashed, 2 dotted), which
  // its legend swatch shows too (a short line of that dash: the `kv-line` class, report.css).
  function line(label, r, style, extra) {
    var s = { label: label, stroke: color(r), width: 1.6, dash: DASH[style || 0],
              spanGaps: true, points: { show: false }, value: function (u, v) { return fmt(v); },
              "class": "kv-line" };
    for (var k in extra || {}) s[k] = extra[k];
    return s;
  }

  // The legend swatch of a series: the CSS border style of its dash, and its fill (a points-only
  // series gives its points' fill: filled and hollow markers stay apart in the legend too).
  var MARKERS = {
    dash: function (u, i) {
      var d = u.series[i].dash;
      return !d || !d.length ? "solid" : d[0] <= 2 ? "dotted" : "dashed";
    },
    fill: function (u, i) {
      var s = u.series[i];
      if (s.markerFill) return s.markerFill;
      return s.fill ? s.fill(u, i) : null;
    }
  };

  // The y axis as wide as its longest tick label (and its ticks), so no label runs under them.
  function ySize(u, values) {
    var longest = (values || []).reduce(function (m, v) { return Math.max(m, v == null ? 0 : String(v).length); }, 0);
    return Math.max(56, Math.ceil(longest * 7.2) + 26);
  }

  function axes(xLabel, yLabel, xValues) {
    return [
      { label: xLabel, values: xValues || ticks, stroke: "#444", grid: { stroke: "#eee" } },
      { label: yLabel, values: ticks, size: ySize, stroke: "#444", grid: { stroke: "#eee" } }
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
  // uPlot series, axes, scales, data (and hooks). window.kvreplayCharts tells a test how many
  // points each chart plotted (false: it failed, and the error is logged).
  function draw(charts) {
    var plots = [], drawn = {}, ranges = {};
    document.querySelectorAll(".plot[data-chart]").forEach(function (el) {
      var id = el.getAttribute("data-chart");
      try {
        var spec = charts[id]();
        // Room above and to the right: the top tick label of the y axis and the last one of the
        // x axis are drawn centred on their tick, half outside the plotting area.
        var hooks = spec.hooks || {};
        hooks.draw = (hooks.draw || []).concat([function (u) {
          ranges[id] = { x: [u.scales.x.min, u.scales.x.max], y: [u.scales.y.min, u.scales.y.max] };
        }]);
        var opts = { width: Math.max(el.clientWidth, 280), height: 250, series: spec.series,
                     axes: spec.axes, scales: spec.scales, padding: [14, 22, null, null],
                     legend: { live: true, markers: MARKERS }, hooks: hooks,
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
    window.kvreplayRanges = ranges;  // each chart's x and y scale, as drawn
    window.kvreplayDrawMs = performance.now() - started;  // parse + draw, for measurements
    document.body.setAttribute("data-rendered", "1");
  }

  return { DATA: DATA, color: color, fmt: fmt, ticks: ticks, padded: padded, line: line,
           axes: axes, categoryAxes: categoryAxes, categoryScale: categoryScale, draw: draw };
})();
