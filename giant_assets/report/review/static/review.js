// The review page: every text goes in as text (textContent), never as HTML.
"use strict";
const REGION = ["relevant", "partly", "not relevant"];
const ANSWER = ["correct", "partly", "wrong"];
const SUPPORTS = ["yes", "partly", "no"];
const SVG = "http://www.w3.org/2000/svg";
let queue = [], position = 0, unit = null, drawn = [];
// deep zoom (report/static/deepzoom.js over OpenSeadragon), when the server has it installed
let zoom = null, zoomTracker = null, redrawing = null, zoomShapes = [], overviewOnly = false;

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function status(text) { document.getElementById("status").textContent = text; }

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function radios(container, name, choices, chosen) {
  for (const choice of choices) {
    const label = el("label");
    const input = el("input", { type: "radio", name, value: choice });
    input.checked = choice === chosen;
    label.append(input, document.createTextNode(" " + choice + " "));
    container.append(label);
  }
}

function chosen(name) {
  const input = document.querySelector(`input[name="${name}"]:checked`);
  return input ? input.value : null;
}

function drawOverlay() {
  drawZoom();
  listDrawn();
  const svg = document.getElementById("overlay");
  svg.replaceChildren();
  const [w, h] = unit.slide_size || [1, 1];
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const box = (b, cls) => {
    const r = document.createElementNS(SVG, "rect");
    r.setAttribute("class", cls);
    r.setAttribute("x", b[0]); r.setAttribute("y", b[1]);
    r.setAttribute("width", b[2]); r.setAttribute("height", b[3]);
    r.setAttribute("vector-effect", "non-scaling-stroke");
    svg.append(r);
  };
  // the numbers are HTML over the picture, sized in screen pixels (CSS), placed in fractions of the slide
  const wrap = document.getElementById("overview-wrap");
  wrap.querySelectorAll(".label").forEach((n) => n.remove());
  unit.regions.forEach((region, i) => {
    box(region.box, "viewed");
    const label = el("span", { class: "label" }, String(i + 1));
    label.style.left = `${(region.box[0] / w) * 100}%`;
    label.style.top = `${(region.box[1] / h) * 100}%`;
    wrap.append(label);
  });
  drawn.forEach((b) => box(b, "drawn"));
}

function enableDrawing() {
  const svg = document.getElementById("overlay");
  let start = null;
  const toSlide = (event) => {
    const rect = svg.getBoundingClientRect();
    const [w, h] = unit.slide_size || [1, 1];
    const x = Math.min(Math.max(event.clientX - rect.left, 0), rect.width) / rect.width * w;
    const y = Math.min(Math.max(event.clientY - rect.top, 0), rect.height) / rect.height * h;
    return [x, y];
  };
  svg.addEventListener("mousedown", (event) => { start = toSlide(event); event.preventDefault(); });
  svg.addEventListener("mouseup", (event) => {
    if (!start) return;
    const end = toSlide(event);
    const b = [Math.min(start[0], end[0]), Math.min(start[1], end[1]),
      Math.abs(end[0] - start[0]), Math.abs(end[1] - start[1])].map(Math.round);
    start = null;
    if (b[2] > 0 && b[3] > 0) { drawn.push(b); drawOverlay(); }
  });
}

// the reviewer's boxes, each with a button to draw it again and one to delete it
function listDrawn() {
  const list = document.getElementById("drawn-list");
  list.replaceChildren(...drawn.map((b, i) => {
    const item = el("li", { "data-drawn": String(i) }, `your region ${i + 1}: [${b.join(", ")}] `);
    const again = el("button", { type: "button", class: "redraw" }, redrawing === i ? "drag on the slide…" : "redraw");
    again.addEventListener("click", () => { redrawing = i; setDrawing(true); listDrawn(); });
    const remove = el("button", { type: "button", class: "delete" }, "delete");
    remove.addEventListener("click", () => { drawn.splice(i, 1); redrawing = null; drawOverlay(); });
    item.append(again, remove);
    return item;
  }));
}

function drawZoom() {
  if (!zoom || !zoom.world.getItemCount()) return;
  zoomShapes.forEach((s) => zoom.removeOverlay(s));
  zoomShapes = [];
  const dz = window.GiantDeepZoom;
  unit.regions.forEach((r, i) => zoomShapes.push(dz.box(zoom, r.box, r.step === null ? "reported" : "crop", String(i + 1))));
  drawn.forEach((b, i) => zoomShapes.push(dz.box(zoom, b, "drawn", `yours ${i + 1}`)));
}

function setDrawing(on) {
  if (!zoom) return;
  zoomTracker.setTracking(on);
  zoom.setMouseNavEnabled(!on);
  const button = document.getElementById("draw-mode");
  button.setAttribute("aria-pressed", String(on));
  button.textContent = on ? "Drawing: drag on the slide" : "Draw a region";
}

function startZoom() {
  const hint = document.getElementById("deepzoom-hint");
  const dz = window.GiantDeepZoom;
  if (!dz) { hint.textContent = "deep zoom could not load: the static overview is shown"; hint.hidden = false; return; }
  dz.load(() => {
    zoom = dz.open(document.getElementById("osd"), unit.dzi);
    zoom.addHandler("open", drawZoom);
    zoomTracker = dz.drawing(zoom, (b) => {
      if (redrawing !== null) drawn[redrawing] = b; else drawn.push(b);
      redrawing = null;
      setDrawing(false);
      drawOverlay();
    });
    document.getElementById("draw-mode").addEventListener("click", () => setDrawing(!zoomTracker.isTracking()));
    const toggle = document.getElementById("view-toggle");
    toggle.addEventListener("click", () => showOverview(!overviewOnly));
    toggle.hidden = false;
    showOverview(overviewOnly);
  }, () => {
    hint.textContent = "deep zoom needs OpenSeadragon: run make (it runs npm ci in frontend/) and restart the server";
    hint.hidden = false;
  });
}

// deep zoom, or the static overview (also where OpenSeadragon is not installed); drawing works on both
function showOverview(on) {
  overviewOnly = on;
  const deep = Boolean(zoom) && !on;
  document.getElementById("deepzoom").hidden = !deep;
  document.getElementById("overview-wrap").hidden = deep;
  document.getElementById("draw-hint").hidden = deep;
  document.getElementById("view-toggle").textContent = deep ? "Show the static overview" : "Show deep zoom";
  if (!deep && zoom) setDrawing(false);
}

async function show(index) {
  position = index;
  const entry = queue[index];
  unit = await api(`/api/unit/${entry.unit}`);
  history.replaceState(null, "", `#${entry.unit}`);  // a reload comes back to this unit
  const review = unit.review || {};
  drawn = (review.drawn || []).map((b) => b.map(Math.round));
  document.getElementById("progress").textContent =
    `${index + 1} of ${queue.length} (${queue.filter((u) => u.reviewed).length} reviewed)`;
  document.getElementById("question").textContent = unit.question;
  document.getElementById("answer").textContent = unit.answer;
  document.getElementById("raw-answer").textContent = unit.raw_answer ?? unit.answer;
  document.getElementById("options").replaceChildren(...(unit.options || []).map((o) => el("li", {}, o)));
  document.getElementById("comment").value = review.comment || "";
  const answer = document.getElementById("answer-rating");
  const supports = document.getElementById("supports-rating");
  answer.replaceChildren(el("legend", {}, "The answer is"));
  supports.replaceChildren(el("legend", {}, "The findings support the answer"));
  radios(answer, "answer", ANSWER, review.answer);
  radios(supports, "supports", SUPPORTS, review.supports);
  const regions = document.getElementById("regions");
  regions.replaceChildren(el("h2", {}, "Regions viewed"));
  unit.regions.forEach((region, i) => {
    const div = el("div", { class: "region", "data-region": String(i) });
    const where = region.step === null ? "reported" : `step ${region.step}`;
    div.append(el("h3", {}, `Region ${i + 1} (${where})`));
    div.append(el("img", { src: `/api/unit/${unit.unit}/region/${i}.jpg`, alt: `region ${i + 1}` }));
    div.append(el("p", { class: "reason" }, region.reason));
    const field = el("fieldset");
    field.append(el("legend", {}, "This region is"));
    radios(field, `region-${i}`, REGION, (review.regions || [])[i]);
    div.append(field);
    regions.append(div);
  });
  document.getElementById("overview").src = `/api/unit/${unit.unit}/overview.png`;
  redrawing = null;
  if (zoom) { zoomShapes = []; zoom.open(unit.dzi); }
  drawOverlay();
  document.getElementById("unit").hidden = false;
  status(unit.review ? `saved ${unit.review.submitted_at}` : "not reviewed yet");
}

async function save() {
  const body = {
    regions: unit.regions.map((_, i) => chosen(`region-${i}`)),
    answer: chosen("answer"),
    supports: chosen("supports"),
    drawn,
    comment: document.getElementById("comment").value,
  };
  // the session's CSRF token came with the page; a page from another origin cannot read it
  const csrf = document.querySelector('meta[name="review-csrf"]').content;
  const saved = await api(`/api/review/${unit.unit}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Review-CSRF": csrf },
    body: JSON.stringify(body),
  });
  queue[position].reviewed = true;
  status(`saved ${saved.submitted_at}`);
  return saved;
}

// keys 1/2/3 rate the first unrated field (regions in order, the answer, the support); Enter saves and
// moves on; nothing happens while the reviewer types in the comment
function onKey(event) {
  if (!unit || event.target.closest("textarea, input[type=text]") || event.ctrlKey || event.metaKey) return;
  if (event.key === "Enter") {
    event.preventDefault();
    document.getElementById("next").click();
    return;
  }
  const k = ["1", "2", "3"].indexOf(event.key);
  if (k < 0) return;
  const fields = [...unit.regions.map((_, i) => [`region-${i}`, REGION]), ["answer", ANSWER], ["supports", SUPPORTS]];
  const open = fields.find(([name]) => chosen(name) === null);
  if (!open) return;
  document.querySelector(`input[name="${open[0]}"][value="${open[1][k]}"]`).click();
  event.preventDefault();
}

async function start() {
  try {
    const listing = await api("/api/queue");
    queue = listing.units;
    if (!queue.length) { document.getElementById("empty").hidden = false; return; }
    const asked = queue.findIndex((u) => `#${u.unit}` === location.hash);
    const first = asked >= 0 ? asked : queue.findIndex((u) => !u.reviewed);
    enableDrawing();
    document.addEventListener("keydown", onKey);
    document.getElementById("submit").addEventListener("click", () => save().catch((e) => status(e.message)));
    document.getElementById("next").addEventListener("click", () =>
      save().then(() => show((position + 1) % queue.length)).catch((e) => status(e.message)));
    document.getElementById("clear-drawn").addEventListener("click", () => { drawn = []; drawOverlay(); });
    await show(first < 0 ? 0 : first);
    startZoom();
  } catch (error) {
    status(error.message);
  }
}

document.addEventListener("DOMContentLoaded", start);
