// Skiff dashboard: forms and buttons with data-api post JSON to the API; parts with
// data-poll refresh their data-field values and charts every few seconds.
"use strict";

const POLL_MS = 2000;
const CHART_POINTS = 300;

function fieldsOf(form) {
  const out = {};
  for (const el of form.elements) {
    if (!el.name) continue;
    if (el.type === "checkbox") out[el.name] = el.checked;
    else if (el.type === "datetime-local") out[el.name] = el.value ? new Date(el.value).getTime() : "";
    else out[el.name] = el.value;
  }
  return out;
}

function show(text, ok) {
  const flash = document.getElementById("flash");
  flash.textContent = text;
  flash.className = "flash " + (ok ? "ok" : "error");
  flash.hidden = false;
}

async function callApi(el, body) {
  if (el.dataset.confirm && !window.confirm(el.dataset.confirm)) return;
  const method = el.dataset.method || "POST";
  const resp = await fetch(el.dataset.api, {
    method, headers: {"Content-Type": "application/json"},
    body: method === "DELETE" ? undefined : JSON.stringify(body),
  });
  const data = await resp.json();
  const result = document.getElementById("result");
  if (resp.status === 401 && el.dataset.api !== "/api/login") {
    location.href = "/login?next=" + encodeURIComponent(location.pathname + location.search);
    return;
  }
  if (!resp.ok) {
    show(data.error || resp.statusText, false);
    return;
  }
  if (el.dataset.then === "reload") {
    location.reload();
    return;
  }
  if (el.dataset.then === "next") {
    const next = new URLSearchParams(location.search).get("next") || "/";
    location.href = next.startsWith("/") && !next.startsWith("//") ? next : "/";
    return;
  }
  show("Done.", true);
  result.textContent = JSON.stringify(data, null, 2);
  result.hidden = false;
}

function wireActions() {
  for (const form of document.querySelectorAll("form[data-api]")) {
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      callApi(form, fieldsOf(form));
    });
  }
  for (const button of document.querySelectorAll("button[data-api]")) {
    button.addEventListener("click", () => callApi(button, JSON.parse(button.dataset.body || "{}")));
  }
  // GET forms with datetime-local inputs send ms since the epoch (the browser's time zone).
  for (const form of document.querySelectorAll("form[data-times]")) {
    form.addEventListener("formdata", (ev) => {
      for (const name of form.dataset.times.split(" ")) {
        const value = ev.formData.get(name);
        if (value) ev.formData.set(name, new Date(value).getTime());
        else ev.formData.delete(name);
      }
      for (const [name, value] of [...ev.formData.entries()]) if (value === "") ev.formData.delete(name);
    });
  }
}

function makeChart(el, labels) {
  const series = [{}].concat(labels.map((label, i) => ({label, stroke: ["#1f6feb", "#d29922"][i], width: 2})));
  return new uPlot({width: el.clientWidth || 800, height: 220, series, scales: {x: {time: true}}},
                   [[]].concat(labels.map(() => [])), el);
}

function ratesChart(el) {
  const chart = makeChart(el, ["in msg/s", "out msg/s"]);
  const refresh = async () => {
    const d = await (await fetch(el.dataset.url)).json();
    chart.setData([d.time, d.in_tps, d.out_tps]);
    el.dataset.points = d.time.length;
  };
  refresh();
  setInterval(refresh, POLL_MS);
}

function formatCell(col, value) {
  if (value === null || value === undefined) return "";
  if (col.endsWith("timestamp")) return value > 0 ? new Date(value).toISOString().replace("T", " ") : "-";
  if (col.endsWith("_tps")) return value.toFixed(1);
  if (col.endsWith("_ratio")) return (value * 100).toFixed(1) + " %";
  return String(value);
}

// tbody[data-rows=NAME][data-cols="a b c"]: the rows of d[NAME], one cell per column.
function fillRows(tbody, rows) {
  const cols = tbody.dataset.cols.split(/\s+/).filter(Boolean);
  tbody.replaceChildren(...rows.map((row) => {
    const tr = document.createElement("tr");
    for (const col of cols) {
      const td = document.createElement("td");
      td.textContent = formatCell(col, row[col]);
      tr.appendChild(td);
    }
    return tr;
  }));
}

function lagChart(el) {
  const c = {el, chart: makeChart(el, ["lag"]), xs: [Date.now() / 1000], ys: [Number(el.dataset.initial)]};
  c.chart.setData([c.xs, c.ys]);
  return c;
}

function wirePolls() {
  for (const el of document.querySelectorAll("[data-chart=rates]")) ratesChart(el);
  for (const box of document.querySelectorAll("[data-poll]")) {
    const charts = [...box.querySelectorAll("[data-chart=lag]")].map(lagChart);
    setInterval(async () => {
      const resp = await fetch(box.dataset.poll);
      if (!resp.ok) return;
      const d = await resp.json();
      for (const el of box.querySelectorAll("[data-field]:not([data-chart])")) el.textContent = d[el.dataset.field];
      for (const tbody of box.querySelectorAll("tbody[data-rows]")) fillRows(tbody, d[tbody.dataset.rows]);
      for (const c of charts) {
        c.xs.push(Date.now() / 1000);
        c.ys.push(d[c.el.dataset.field]);
        if (c.xs.length > CHART_POINTS) { c.xs.shift(); c.ys.shift(); }
        c.chart.setData([c.xs, c.ys]);
        c.el.dataset.points = c.xs.length;
      }
    }, POLL_MS);
  }
}

wireActions();
wirePolls();
