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
