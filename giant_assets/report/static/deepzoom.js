// Deep zoom over a slide's own tiles (/slides/<key>.dzi), shared by the trajectory viewer and the
// review page: loads OpenSeadragon from this server (installed by make; never a CDN), opens a viewer,
// and places boxes given in level-0 pixels (the Deep Zoom image's own coordinates). Labels are HTML in
// screen pixels, so they read the same at every zoom. Styles are set from script (the review page's
// Content-Security-Policy allows no inline style sheet).
(function () {
  "use strict";
  const VENDOR = "/static/vendor/openseadragon/";
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = { crop: "#00a0ff", patch: "#00a0ff", extent: "#00a0ff", reference: "#28c828",
    reported: "#ff8c00", drawn: "#00a000", selected: "#ff00ff" };

  function load(ready, missing) {
    if (window.OpenSeadragon) { ready(window.OpenSeadragon); return; }
    const script = document.createElement("script");
    script.src = VENDOR + "openseadragon.min.js";
    script.onload = () => (window.OpenSeadragon ? ready(window.OpenSeadragon) : missing());
    script.onerror = missing;
    document.head.appendChild(script);
  }

  function open(element, dzi, options) {
    if (!element.clientHeight) element.style.height = "70vh";
    element.style.background = "#222";
    const viewer = window.OpenSeadragon(Object.assign({
      element,
      tileSources: dzi,
      prefixUrl: VENDOR + "images/",
      drawer: "canvas",
      showNavigator: true,
      maxZoomPixelRatio: 4,
      visibilityRatio: 0.5,
      gestureSettingsMouse: { clickToZoom: false },
    }, options || {}));
    viewer.giantTiles = 0;  // tiles drawn so far (the browser tests count them)
    viewer.addHandler("tile-loaded", () => { viewer.giantTiles += 1; });
    return viewer;
  }

  function rect(viewer, box) {
    return viewer.viewport.imageToViewportRectangle(box[0], box[1], box[2], box[3]);
  }

  // a box overlay: a coloured outline, an optional label in screen pixels, an optional click
  function box(viewer, b, kind, label, onClick) {
    const div = document.createElement("div");
    div.className = "dz-box dz-" + kind;
    div.dataset.box = JSON.stringify(b);
    const color = COLORS[kind] || COLORS.crop;
    Object.assign(div.style, { border: `2px ${kind === "extent" ? "dashed" : "solid"} ${color}`,
      boxSizing: "border-box", cursor: onClick ? "pointer" : "default" });
    if (kind === "drawn") div.style.background = "rgba(0, 160, 0, 0.15)";
    if (label) {
      const span = document.createElement("span");
      span.className = "dz-label";
      span.textContent = label;
      // a reported region's label sits under its box: a crop on the same box keeps its number readable
      Object.assign(span.style, { position: "absolute", left: "0", top: kind === "reported" ? "100%" : "0",
        background: "#fff", color, font: "bold 13px/1.1 system-ui, sans-serif", padding: "1px 4px", whiteSpace: "nowrap" });
      div.appendChild(span);
    }
    viewer.addOverlay({ element: div, location: rect(viewer, b) });
    if (onClick) {
      new window.OpenSeadragon.MouseTracker({ element: div, clickHandler: (e) => { if (e.quick) onClick(e); } });
    }
    return div;
  }

  // the path through the numbered boxes' centres, in image coordinates, as a thin line at any zoom
  function path(viewer, boxes, size) {
    if (boxes.length < 2) return null;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", `0 0 ${size[0]} ${size[1]}`);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("class", "dz-path");
    svg.style.pointerEvents = "none";
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", boxes.map((b) => `${b[0] + b[2] / 2},${b[1] + b[3] / 2}`).join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", COLORS.crop);
    line.setAttribute("stroke-width", "2");
    line.setAttribute("stroke-dasharray", "6 4");
    line.setAttribute("vector-effect", "non-scaling-stroke");
    svg.appendChild(line);
    viewer.addOverlay({ element: svg, location: rect(viewer, [0, 0, size[0], size[1]]) });
    return svg;
  }

  // drag on the slide to draw a box (level-0, rounded); the slide does not pan meanwhile
  function drawing(viewer, done) {
    let start = null, shape = null;
    const at = (e) => viewer.viewport.viewerElementToImageCoordinates(e.position);
    const boxOf = (a, b) => [Math.min(a.x, b.x), Math.min(a.y, b.y), Math.abs(b.x - a.x), Math.abs(b.y - a.y)]
      .map(Math.round);
    const tracker = new window.OpenSeadragon.MouseTracker({
      element: viewer.canvas,
      pressHandler: (e) => { start = at(e); },
      dragHandler: (e) => {
        if (!start) return;
        const b = boxOf(start, at(e));
        if (shape) viewer.removeOverlay(shape);
        shape = box(viewer, b, "selected", null, null);
      },
      releaseHandler: (e) => {
        if (!start) return;
        const b = boxOf(start, at(e));
        start = null;
        if (shape) { viewer.removeOverlay(shape); shape = null; }
        if (b[2] > 0 && b[3] > 0) done(b);
      },
    });
    tracker.setTracking(false);
    return tracker;
  }

  window.GiantDeepZoom = { load, open, box, path, drawing, rect };
})();
