/* kvreplay HTML report: the charts of one or more runs, drawn from the page's data section
   by plots.js (the shared chart code, inlined before this script). */
(function (P) {
  "use strict";
  var DATA = P.DATA, RUNS = DATA.runs;
  var color = P.color, fmt = P.fmt, padded = P.padded, axes = P.axes;

  // Series `i` of run `r`: with one run each series has its own colour (and dash); with several
  // the colour is the run's and the dash tells its series apart (the legend swatch shows it).
  function line(label, r, i, extra) {
    return P.line(label, RUNS.length > 1 ? r : i, i, extra);
  }

  function bars(label, r, n) {
    var align = n === 2 ? (r === 0 ? -1 : 1) : 0;
    return { label: label, stroke: color(r), fill: color(r) + "b0", width: 1,
             paths: uPlot.paths.bars({ size: [n === 2 ? 0.4 : 0.7, 48], align: align }),
             points: { show: false }, value: function (u, v) { return fmt(v); } };
  }

  // Series with their own x values, merged on one sorted x axis (null where a series has none).
  function merge(parts) {
    var idx = [];
    parts.forEach(function (p, s) { p.x.forEach(function (x, i) { idx.push([x, s, i]); }); });
    idx.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1] || a[2] - b[2]; });
    var xs = idx.map(function (e) { return e[0]; });
    var ys = parts.map(function () { return idx.map(function () { return null; }); });
    idx.forEach(function (e, k) { ys[e[1]][k] = parts[e[1]].y[e[2]]; });
    return [xs].concat(ys);
  }

  function cdfChart(key, title) {
    var parts = [], series = [{ label: title + " (ms)", value: function (u, v) { return fmt(v); } }];
    RUNS.forEach(function (run, r) {
      var c = run.cdf[key];
      if (!c) return;
      parts.push({ x: c.x, y: c.p });
      var fromSummary = c.source === "summary";
      // A CDF holds its value until the next sample: steps, drawn exactly at any sample count.
      var extra = { paths: uPlot.paths.stepped({ align: 1 }) };
      if (fromSummary) extra.points = { show: true, size: 6 };
      series.push(P.line(run.label + (fromSummary ? " (percentiles)" : ""), r, fromSummary ? 1 : 0, extra));
    });
    // Latencies are not negative: the x axis starts at 0 ms, so the curves' offsets compare.
    function fromZero(u, lo, hi) { var r = padded(u, lo, hi); return [lo >= 0 ? 0 : r[0], r[1]]; }
    return { data: merge(parts), series: series, axes: axes(title + " (ms)", "fraction of requests"),
             scales: { x: { time: false, range: fromZero }, y: { range: [0, 1.02] } } };
  }

  function timeChart(fields, yLabel) {
    var t = DATA.timeline.t_s, data = [t], series = [{ label: "time (s)", value: function (u, v) { return fmt(v); } }];
    RUNS.forEach(function (run, r) {
      if (!run.timeline) return;
      fields.forEach(function (f, i) {
        var ys = run.timeline[f[0]];
        if (!ys) return;
        data.push(ys);
        series.push(line(run.label + ": " + f[1], r, i));
      });
    });
    return { data: data, series: series, axes: axes("simulated time (s)", yLabel),
             scales: { x: { time: false } } };
  }

  function ratioChart(pick, yLabel) {
    var t = DATA.ratio_grid.t_s, data = [t], series = [{ label: "time (s)", value: function (u, v) { return fmt(v); } }];
    RUNS.forEach(function (run, r) {
      pick(run).forEach(function (f, i) {
        if (!f[0]) return;
        data.push(f[0]);
        series.push(line(run.label + ": " + f[1], r, i, { points: { show: true, size: 4 } }));
      });
    });
    return { data: data, series: series, axes: axes("simulated time (s)", yLabel),
             scales: { x: { time: false } } };
  }

  // Telemetry samples: each run's own sample times, one series per rank (or summarized).
  function samplesChart(pick, yLabel, yRange) {
    var parts = [], series = [{ label: "time (s)", value: function (u, v) { return fmt(v); } }];
    RUNS.forEach(function (run, r) {
      var tl = run.telemetry;
      if (!tl) return;
      pick(tl).forEach(function (f) {
        if (!f[0]) return;
        parts.push({ x: tl.t_s, y: f[0] });
        // One run: a colour per rank, dashed for its resident share; several: the run's colour.
        series.push(P.line((RUNS.length > 1 ? run.label + ": " : "") + f[1],
                           RUNS.length > 1 ? r : f[3], f[2] ? 1 : 0));
      });
    });
    var scales = { x: { time: false } };
    if (yRange) scales.y = { range: yRange };
    return { data: merge(parts), series: series, axes: axes("simulated time (s)", yLabel),
             scales: scales };
  }
  function perRank(tl, key, suffix, dashed) {
    return tl.names.map(function (n, i) { return [tl[key][i], n + (suffix || ""), dashed, i]; });
  }

  // Series on each run's own bins (G2 and G3 timelines: runs of different lengths bin
  // differently); `tier` names the run's field ("g2" unless told).
  function ownTimeChart(pick, yLabel, yRange, tier) {
    var parts = [], series = [{ label: "time (s)", value: function (u, v) { return fmt(v); } }];
    RUNS.forEach(function (run, r) {
      var tl = run[tier || "g2"] && run[tier || "g2"].timeline;
      if (!tl) return;
      pick(tl).forEach(function (f, i) {
        if (!f[0]) return;
        parts.push({ x: tl.t_s, y: f[0] });
        series.push(line(run.label + ": " + f[1], r, i));
      });
    });
    var scales = { x: { time: false } };
    if (yRange) scales.y = { range: yRange };
    return { data: merge(parts), series: series, axes: axes("simulated time (s)", yLabel),
             scales: scales };
  }

  // A tier's pool occupancy: all pools together, and the fullest and emptiest of several.
  function occupancyChart(tier) {
    return ownTimeChart(function (tl) {
      return [[tl.occupancy, tl.pools > 1 ? "all " + tl.pools + " pools" : "pool"],
              [tl.occupancy_max, "fullest pool"], [tl.occupancy_min, "emptiest pool"]];
    }, "used share of capacity", [0, 1.02], tier);
  }

  // Each bar's value above it (as a percent): a share of a few tenths of a percent is then read
  // even where its bar is a hairline.
  function barLabels(u) {
    var ctx = u.ctx, n = u.series.length - 1;
    var step = u.valToPos(1, "x", true) - u.valToPos(0, "x", true);
    ctx.save();
    ctx.font = Math.round(11 * devicePixelRatio) + "px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.fillStyle = "#333";
    for (var s = 1; s <= n; s++) {
      var ys = u.data[s], shift = n === 2 ? (s === 1 ? -0.2 : 0.2) * step : 0;
      for (var i = 0; i < ys.length; i++) {
        if (ys[i] == null) continue;
        var v = ys[i] * 100;
        var text = v === 0 ? "0%" : v < 0.1 ? "<0.1%" : (v >= 10 ? v.toFixed(0) : v.toFixed(1)) + "%";
        ctx.fillText(text, u.valToPos(i, "x", true) + shift, u.valToPos(ys[i], "y", true) - 4 * devicePixelRatio);
      }
    }
    ctx.restore();
  }

  // Bars over categories (workers, overlap values): one bar per run and category.
  function barChart(names, valuesOf, label, yLabel, xLabel) {
    var index = {}, order = [];
    RUNS.forEach(function (run) {
      names(run).forEach(function (n) { if (!(n in index)) { index[n] = order.length; order.push(n); } });
    });
    var xs = order.map(function (n, i) { return i; });
    var data = [xs], series = [{ label: xLabel, value: function (u, v) { return v == null ? "" : order[v]; } }];
    var shown = RUNS.filter(function (run) { return names(run).length; }).length;
    RUNS.forEach(function (run, r) {
      var ns = names(run);
      if (!ns.length) return;
      var ys = xs.map(function () { return null; });
      var vs = valuesOf(run);
      ns.forEach(function (n, i) { ys[index[n]] = vs[i]; });
      data.push(ys);
      series.push(bars(run.label + ": " + label, r, shown));
    });
    // One pool everywhere: its name goes to the axis title, the ticks keep the worker ids.
    var pools = order.map(function (n) { return n.split(" ")[0]; });
    var onePool = order.length > 1 && order.every(function (n, i) { return n.indexOf(" ") > 0 && pools[i] === pools[0]; });
    var ticksText = onePool ? order.map(function (n) { return n.slice(pools[0].length + 1); }) : order;
    return { data: data, series: series,
             axes: P.categoryAxes(ticksText, onePool ? xLabel + " (" + pools[0] + ")" : xLabel, yLabel),
             scales: { x: P.categoryScale(order), y: { range: function (u, lo, hi) { return [0, hi > 0 ? hi * 1.08 : 1]; } } } };
  }

  function workerNames(run) { return (run.workers || []).map(function (w) { return w.name; }); }
  function workerField(f) { return function (run) { return (run.workers || []).map(function (w) { return w[f]; }); }; }

  var CHARTS = {
    "cdf-ttft": function () { return cdfChart("ttft_ms", "TTFT"); },
    "cdf-tpot": function () { return cdfChart("tpot_ms", "TPOT"); },
    "cdf-itl": function () { return cdfChart("itl_ms", "ITL"); },
    "cdf-e2e": function () { return cdfChart("e2e_latency_ms", "E2E latency"); },
    "timeline-requests": function () {
      return timeChart([["arrived", "arrived"], ["completed", "completed"], ["ended_otherwise", "rejected/canceled/failed"]], "requests (cumulative)");
    },
    "timeline-load": function () {
      return timeChart([["in_flight", "in flight"], ["waiting", "waiting for admission"], ["router_queue", "router queue"]], "requests (mean per bin)");
    },
    "timeline-replicas": function () {
      // Each pool's counts hold until the next operation: steps on the run's own times.
      var parts = [], series = [{ label: "time (s)", value: function (u, v) { return fmt(v); } }];
      RUNS.forEach(function (run, r) {
        var pools = run.scaling && run.scaling.pools;
        if (!pools) return;
        Object.keys(pools).sort().forEach(function (pool, p) {
          // One run: a colour per pool; several: the run's. The dash tells the counts apart.
          var c = pools[pool];
          ["provisioned", "active", "draining"].forEach(function (f, i) {
            parts.push({ x: c.t_s, y: c[f] });
            series.push(P.line(run.label + ": " + pool + " " + f, RUNS.length > 1 ? r : p, i,
                               { paths: uPlot.paths.stepped({ align: 1 }) }));
          });
        });
      });
      return { data: merge(parts), series: series, axes: axes("simulated time (s)", "workers"),
               scales: { x: { time: false }, y: { range: function (u, lo, hi) { return [0, hi + 1]; } } } };
    },
    "reuse-time": function () {
      return ratioChart(function (run) {
        if (!run.reuse) return [];
        // With G3 the host share splits: restored from G2, and brought up from G3 first.
        if (run.reuse.g3) return [[run.reuse.g1, "G1"], [run.reuse.g2, "G2 (host)"], [run.reuse.g3, "G3"]];
        return [[run.reuse.g1, "G1"], [run.reuse.host, "G2 (host)"]];
      }, "reused share");
    },
    "reuse-workers": function () {
      return barChart(workerNames, workerField("reuse_ratio"), "reuse", "reused share", "worker");
    },
    "load-workers": function () {
      return barChart(workerNames, workerField("requests"), "requests", "requests routed", "worker");
    },
    "routing-overlap": function () {
      // Bins that double (0, 1, 2-3, 4-7...): a few bars whatever the spread, each labelled.
      function bins(run) { return (run.routing && run.routing.overlap_bins) || []; }
      var chart = barChart(function (run) { return bins(run).map(function (b) { return b[0]; }); },
                           function (run) {
                             var total = bins(run).reduce(function (s, b) { return s + b[1]; }, 0);
                             return bins(run).map(function (b) { return b[1] / total; });
                           }, "decisions", "share of decisions", "best available - selected overlap (blocks)");
      chart.hooks = { draw: [barLabels] };
      chart.scales.y = { range: function (u, lo, hi) { return [0, hi > 0 ? hi * 1.15 : 1]; } };
      return chart;
    },
    "g2-restores": function () {
      return ratioChart(function (run) {
        return run.g2 ? [[run.g2.restored_tokens_per_s, "restored tokens/s"]] : [];
      }, "restored tokens/s");
    },
    "g2-traffic-blocks": function () {
      return ownTimeChart(function (tl) {
        return [[tl.stored_blocks_per_s, "stored (D2H)"], [tl.restored_blocks_per_s, "restored (H2D)"],
                [tl.evicted_blocks_per_s, "evicted"]];
      }, "blocks/s");
    },
    "g2-traffic-bytes": function () {
      return ownTimeChart(function (tl) {
        return [[tl.stored_gb_per_s, "stored (D2H)"], [tl.restored_gb_per_s, "restored (H2D)"]];
      }, "GB/s");
    },
    "g2-occupancy": function () { return occupancyChart("g2"); },
    "g3-restores": function () {
      return ratioChart(function (run) {
        return run.g3 ? [[run.g3.restored_tokens_per_s, "tokens/s from G3"]] : [];
      }, "restored tokens/s");
    },
    "g3-traffic-blocks": function () {
      return ownTimeChart(function (tl) {
        return [[tl.stored_blocks_per_s, "written (G2 to G3)"], [tl.restored_blocks_per_s, "read (G3 to G2)"],
                [tl.evicted_blocks_per_s, "evicted"]];
      }, "blocks/s", null, "g3");
    },
    "g3-traffic-bytes": function () {
      return ownTimeChart(function (tl) {
        return [[tl.stored_gb_per_s, "written"], [tl.restored_gb_per_s, "read"]];
      }, "GB/s", null, "g3");
    },
    "g3-occupancy": function () { return occupancyChart("g3"); },
    "telemetry-usage": function () {
      return samplesChart(function (tl) {
        return perRank(tl, "usage").concat(perRank(tl, "physical", " resident", true));
      }, "share of G1 blocks", [0, 1.02]);
    },
    "telemetry-waiting": function () {
      return samplesChart(function (tl) {
        var out = perRank(tl, "waiting");
        if (tl.router_queue) out.push([tl.router_queue, "router queue", true, tl.names.length]);
        return out;
      }, "waiting requests");
    },
    "telemetry-running": function () {
      return samplesChart(function (tl) { return perRank(tl, "running"); }, "running requests");
    },
    "spec-acceptance": function () {
      function spec(run) { return run.speculation || { positions: [], acceptance_rate: [] }; }
      var chart = barChart(function (run) { return spec(run).positions; },
                           function (run) { return spec(run).acceptance_rate; },
                           "acceptance rate", "accepted / reached", "draft position");
      chart.hooks = { draw: [barLabels] };
      chart.scales.y = { range: [0, 1.15] };
      return chart;
    },
    "spec-itl": function () {
      var parts = [], series = [{ label: "token gap (ms)", value: function (u, v) { return fmt(v); } }];
      RUNS.forEach(function (run, r) {
        var s = run.speculation;
        if (!s || !s.itl) return;
        [[s.itl, "all gaps"], [s.step_itl, "between steps"]].forEach(function (c, i) {
          parts.push({ x: c[0].x, y: c[0].p });
          series.push(line(run.label + ": " + c[1], r, i,
                           { paths: uPlot.paths.stepped({ align: 1 }), points: { show: true, size: 5 } }));
        });
      });
      return { data: merge(parts), series: series, axes: axes("token gap (ms)", "fraction of gaps"),
               scales: { x: { time: false, range: function (u, lo, hi) { return [0, padded(u, lo, hi)[1]]; } },
                         y: { range: [0, 1.02] } } };
    },
    "g2-workers": function () {
      return barChart(function (run) { return (run.workers || []).filter(function (w) { return w.host_ratio != null; }).map(function (w) { return w.name; }); },
                      function (run) { return (run.workers || []).filter(function (w) { return w.host_ratio != null; }).map(function (w) { return w.host_ratio; }); },
                      "host share", "restored share", "worker");
    }
  };

  P.draw(CHARTS);
})(kvreplayPlots);
