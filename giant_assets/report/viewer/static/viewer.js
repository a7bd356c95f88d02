// Index page: filter rows by benchmark, outcome and error kind; sort by cost or steps. No network.
(function () {
  "use strict";
  const table = document.getElementById("items");
  if (!table) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const pick = (id) => document.getElementById(id);
  const controls = ["filter-benchmark", "filter-outcome", "filter-error", "sort"].map(pick);
  const shown = pick("shown");

  function matches(row, benchmark, outcome, error) {
    const errors = row.dataset.errors ? row.dataset.errors.split(" ") : [];
    if (benchmark && row.dataset.benchmark !== benchmark) return false;
    if (outcome && row.dataset.outcome !== outcome) return false;
    if (error === "-") return errors.length === 0;
    return !error || errors.includes(error);
  }

  function apply() {
    const [benchmark, outcome, error, sort] = controls.map((c) => c.value);
    const [key, direction] = sort ? sort.split(":") : ["order", "asc"];
    const sign = direction === "desc" ? -1 : 1;
    const sorted = rows.slice().sort((a, b) =>
      sign * (Number(a.dataset[key]) - Number(b.dataset[key])) || Number(a.dataset.order) - Number(b.dataset.order));
    let visible = 0;
    for (const row of sorted) {
      const keep = matches(row, benchmark, outcome, error);
      row.hidden = !keep;
      visible += keep ? 1 : 0;
      body.appendChild(row);
    }
    shown.textContent = visible + " of " + rows.length + " shown";
  }

  controls.forEach((c) => c.addEventListener("change", apply));
  apply();
})();
