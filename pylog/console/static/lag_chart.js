// The group page's lag chart: polls the console's own JSON (lag.json) and draws the samples as an SVG line.
// No library, no build step; the SVG carries data-points and data-last-lag for whoever reads the page.
(function () {
  "use strict";
  var svg = document.getElementById("lag-chart");
  if (!svg) { return; }
  var line = document.getElementById("lag-line");
  var width = 600, height = 160, pad = 6;

  function text(id, value) { document.getElementById(id).textContent = value; }

  function draw(points) {
    var known = points.filter(function (p) { return p[1] !== null; });
    svg.setAttribute("data-points", String(known.length));
    if (known.length === 0) { line.setAttribute("points", ""); return; }
    var t0 = known[0][0], t1 = known[known.length - 1][0];
    var max = Math.max.apply(null, known.map(function (p) { return p[1]; }));
    var span = Math.max(1, t1 - t0), top = Math.max(1, max);
    line.setAttribute("points", known.map(function (p) {
      var x = known.length === 1 ? width / 2 : pad + (p[0] - t0) / span * (width - 2 * pad);
      var y = height - pad - p[1] / top * (height - 2 * pad);
      return x.toFixed(1) + "," + y.toFixed(1);
    }).join(" "));
    var last = known[known.length - 1][1];
    svg.setAttribute("data-last-lag", String(last));
    text("lag-latest", String(last));
    text("lag-max", String(max));
    text("lag-span", known.length + " samples over " + Math.round((t1 - t0) / 1000) + " s");
  }

  function poll() {
    fetch(svg.getAttribute("data-url"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) { if (body) { draw(body.points); } })
      .catch(function () { /* the next poll tries again */ })
      .finally(function () { setTimeout(poll, Number(svg.getAttribute("data-interval-ms")) || 5000); });
  }
  poll();
})();
