// Index page: filter rows by benchmark, outcome and error kind; sort by cost or steps. No network.
(function () {
  "use strict";
  const table = document.getElementById("items");
  if (!table) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const pick = (id) => document.getElementById(id);
  const controls = ["filter-benchmark", "filter-outcome", "filter-error", "filter-flag", "sort"].map(pick);
  // per benchmark and item, from ../_items/<benchmark>.js: experiments that answered it, and whether
  // their voted answers disagree (loaded with script tags, so it works from file:// too)
  const items = window.GIANT_ITEMS || {};
  const shown = pick("shown");

  function disagree(row) {
    const item = (items[row.dataset.benchmark] || {})[row.dataset.id];
    return Boolean(item && item.disagree);
  }

  function matches(row, benchmark, outcome, error, flag) {
    const errors = row.dataset.errors ? row.dataset.errors.split(" ") : [];
    if (benchmark && row.dataset.benchmark !== benchmark) return false;
    if (outcome && row.dataset.outcome !== outcome) return false;
    if (flag === "confident" && row.dataset.confident !== "1") return false;
    if (flag === "disagree" && !disagree(row)) return false;
    if (error === "-") return errors.length === 0;
    return !error || errors.includes(error);
  }

  function apply() {
    const [benchmark, outcome, error, flag, sort] = controls.map((c) => c.value);
    const [key, direction] = sort ? sort.split(":") : ["order", "asc"];
    const sign = direction === "desc" ? -1 : 1;
    const sorted = rows.slice().sort((a, b) =>
      sign * (Number(a.dataset[key]) - Number(b.dataset[key])) || Number(a.dataset.order) - Number(b.dataset.order));
    let visible = 0;
    for (const row of sorted) {
      const keep = matches(row, benchmark, outcome, error, flag);
      row.hidden = !keep;
      visible += keep ? 1 : 0;
      body.appendChild(row);
    }
    shown.textContent = visible + " of " + rows.length + " shown";
  }

  controls.forEach((c) => c.addEventListener("change", apply));
  apply();
})();

// Item page, served by giant-view: the slide in deep zoom (OpenSeadragon over the slide's own tiles),
// each run's viewed regions numbered over it (a path review's reported regions R1, R2... in orange). Opened from a file there is no tile server: the static
// overview alone, as before.
(function () {
  "use strict";
  const zooms = Array.from(document.querySelectorAll(".deepzoom[data-dzi]"));
  if (!zooms.length || !/^https?:$/.test(location.protocol)) return;
  const hint = () => document.querySelectorAll(".deepzoom-hint").forEach((p) => { p.hidden = false; });

  // a step (the image as sent, its digest check, the model's text) or a reported region's texts
  function showEntry(panel, id) {
    const entry = document.getElementById(id);
    if (!entry) return;
    const close = document.createElement("button");
    close.type = "button";
    close.textContent = "close";
    close.addEventListener("click", () => { panel.hidden = true; });
    const copy = entry.cloneNode(true);  // the image as sent, its digest check and the model's text
    copy.removeAttribute("id");
    panel.replaceChildren(close, copy);
    panel.hidden = false;
  }

  function start(dz) {
    for (const zoom of zooms) {
      zoom.hidden = false;
      const run = zoom.dataset.run;
      const overlays = JSON.parse(zoom.dataset.overlays || "[]");
      const panel = zoom.querySelector(".step-panel");
      const viewer = dz.open(zoom.querySelector(".osd"), zoom.dataset.dzi);
      zoom.giantViewer = viewer;
      viewer.addHandler("open", () => {
        const size = viewer.world.getItemAt(0).getContentSize();
        // the path joins the viewed regions (numbered steps), not the regions a path review reported
        const viewed = overlays.filter((o) => o.n !== null && o.step !== null);
        dz.path(viewer, viewed.map((o) => o.box), [size.x, size.y]);
        for (const o of overlays) {
          const label = o.label || (o.n !== null ? String(o.n) : null);
          const entry = o.kind === "reported" ? `run-${run}-reported-${o.n}` : `run-${run}-step-${o.step}`;
          const click = o.step !== null || o.kind === "reported" ? () => showEntry(panel, entry) : null;
          const div = dz.box(viewer, o.box, o.kind, label, click);
          if (o.step !== null) div.dataset.step = String(o.step);
        }
      });
      viewer.addHandler("open-failed", () => { zoom.hidden = true; hint(); });
    }
  }

  const script = document.createElement("script");
  script.src = "/static/deepzoom.js";
  script.onload = () => window.GiantDeepZoom.load(() => start(window.GiantDeepZoom), hint);
  script.onerror = hint;
  document.head.appendChild(script);
})();
