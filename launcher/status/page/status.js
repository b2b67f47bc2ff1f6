// The live job page's script (docs/observability.md, "The live page"): takes each JobView from
// the server-sent events of /api/events (polling /api/job instead with ?poll=MS or without
// EventSource), renders the job, the ranks table and the charts, and shows a
// rank's output tail (/api/logs) when its row is clicked. Draws its own SVG: nothing is loaded
// from anywhere but this server.
//
// The job's token comes in the page's URL (?token=, as the launcher prints it) and goes with every
// request of this script: in an Authorization header for fetch(), in the URL for EventSource
// (which cannot send headers). Not a cookie: a browser sends a cookie for 127.0.0.1 to every port
// of 127.0.0.1, so another user's server on this machine would receive it.
'use strict';

const POLL_MS = 2000;      // polling interval without a stream, and the log panel's refresh
const MAX_CIRCLES = 400;   // points drawn as circles per series; longer curves are a path only
const SVG_NS = 'http://www.w3.org/2000/svg';

let view = null;           // the last JobView
let receivedAt = 0;        // Date.now() when it arrived, for the uptime between updates
let selectedRank = null;   // the rank whose log is shown
const token = new URLSearchParams(location.search).get('token') || '';

// fetch() of this server with the job's token.
function get(path) {
  return fetch(path, {cache: 'no-store', headers: {Authorization: 'Bearer ' + token}});
}

const $ = (id) => document.getElementById(id);

function text(v) { return v === null || v === undefined ? '' : String(v); }

function duration(ms) {
  if (ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + r + 's';
}

function number(v, digits) {
  if (v === null || v === undefined) return '';
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString('en-US');
  return Number(v).toPrecision(digits);
}

// "2026-11-28 03:50:12 UTC": the same in every browser and time zone.
function utc(ms) { return new Date(ms).toISOString().slice(0, 19).replace('T', ' ') + ' UTC'; }

function finished(v) { return v !== null && v.state === 'finished'; }

function renderJob(v) {
  $('job-id').textContent = v.job_id;
  // Once finished the state is the outcome: succeeded, failed or stopped, with the exit code.
  const shown = finished(v) && v.outcome ? v.outcome : v.state;
  document.title = 'dslaunch ' + v.job_id + ' (' + shown + ')';
  const failed = finished(v) && v.exit_code !== null && v.exit_code !== 0 && v.outcome !== 'stopped';
  const state = $('job-state');
  state.textContent = shown + (v.exit_code !== null ? ' (exit ' + v.exit_code + ')' : '');
  state.className = 'state ' + (failed ? 'failed' : shown);
  const hasEnd = finished(v) && v.ended_ms !== null && v.ended_ms !== undefined;
  $('job-end-label').hidden = !hasEnd;
  $('job-end').hidden = !hasEnd;
  if (hasEnd) {
    $('job-outcome').textContent = shown;
    $('job-exit-code').textContent = text(v.exit_code);
    $('job-duration').textContent = duration(v.duration_ms);
    $('job-ended').textContent = utc(v.ended_ms);
  }
  $('job-command').textContent = v.command.join(' ');
  $('job-hosts').textContent = [...new Set(v.nodes.map((n) => n.host))].join(', ');
  $('job-generation').textContent = v.generation + (v.restarts ? ' (' + v.restarts + ' restarts)' : '');
  // A model split into stages or over tensor ranks (docs/parallelism.md): its grid.
  const grid = v.grid || null;
  $('job-grid-label').hidden = $('job-grid').hidden = !grid;
  $('job-grid').textContent =
      grid ? grid.pipeline + (grid.pipeline === 1 ? ' stage x ' : ' stages x ') + grid.data + ' data x ' + grid.tensor +
      ' tensor' : '';
  $('job-stragglers').textContent = v.stragglers_total;
  const cause = $('job-root-cause');
  cause.hidden = !v.root_cause;
  cause.textContent = v.root_cause;
  renderUptime();
}

function renderUptime() {
  if (!view || !view.started_ms) return;
  if (finished(view) && view.ended_ms) {  // the clock stopped with the job
    $('job-uptime').textContent = duration(view.ended_ms - view.started_ms);
    return;
  }
  const live = finished(view) ? 0 : Date.now() - receivedAt;
  $('job-uptime').textContent = duration(view.now_ms - view.started_ms + live);
}

// Why and since when each flagged rank is a straggler (docs/observability.md, "Straggler rule").
function renderStragglers(v) {
  const list = $('straggler-list');
  list.replaceChildren();
  const rule = v.straggler_rule;
  for (const r of v.ranks) {
    const d = r.straggler_detail;
    if (!r.straggler || !d) continue;
    const li = document.createElement('li');
    li.className = 'straggler';
    li.id = 'straggler-' + r.rank;
    li.dataset.rank = r.rank;
    let why = 'rank ' + r.rank + ' on ' + r.host + ': ' + number(d.median_ms, 3) + ' ms/step against its peers\' median of ' +
              number(d.peers_median_ms, 3) + ' ms';
    if (d.peers_median_ms > 0) why += ' (' + (d.median_ms / d.peers_median_ms).toFixed(1) + 'x';
    if (rule) {
      why += '; flagged above ' + rule.factor + 'x and ' + rule.margin_ms + ' ms more over ' + rule.window +
             ' steps, ' + rule.patience + (rule.patience === 1 ? ' check' : ' checks') + ' in a row';
    }
    if (d.peers_median_ms > 0) why += ')';
    why += ', since step ' + d.since_step + (d.since_ms ? ' (' + utc(d.since_ms) + ')' : '');
    li.textContent = why;
    list.appendChild(li);
  }
  list.hidden = list.children.length === 0;
}

function cell(row, value, cls) {
  const td = document.createElement('td');
  td.textContent = text(value);
  if (cls) td.className = cls;
  row.appendChild(td);
}

function renderRanks(v) {
  const heartbeat = {};
  for (const n of v.nodes) heartbeat[n.node_rank] = n.last_heartbeat_ms;
  const body = document.querySelector('#ranks tbody');
  body.replaceChildren();
  const grid = !!v.grid;
  $('ranks-grid').hidden = !grid;
  for (const r of v.ranks) {
    const row = document.createElement('tr');
    row.className = 'rank ' + r.state + (r.straggler ? ' straggler' : '') + (r.rank === selectedRank ? ' selected' : '');
    row.dataset.rank = r.rank;
    row.id = 'rank-' + r.rank;
    const hb = heartbeat[r.node_rank];
    cell(row, r.rank, 'num');
    cell(row, r.host, 'host');
    if (grid) cell(row, r.grid ? r.grid.stage + '/' + r.grid.data + '/' + r.grid.tensor : '', 'grid');
    cell(row, r.pid || '', 'num pid');
    cell(row, r.state, 'state');
    cell(row, hb ? duration(v.now_ms - hb) + ' ago' : '', 'heartbeat');
    cell(row, r.last_step >= 0 ? r.last_step : '', 'num step');
    cell(row, r.step_ms === null ? '' : number(r.step_ms, 3) + ' ms', 'num step-time');
    cell(row, r.loss === null ? '' : number(r.loss, 4), 'num loss');
    cell(row, r.tokens_per_s === null ? '' : number(r.tokens_per_s, 3), 'num tokens');
    cell(row, r.exit_text, 'exit');
    row.addEventListener('click', () => showLog(r.rank));
    body.appendChild(row);
  }
}

function svg(tag, attrs, parent) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, val] of Object.entries(attrs)) el.setAttribute(k, val);
  if (parent) parent.appendChild(el);
  return el;
}

// Draws each of `series` ({name, points: [[step, value], ...]}) into the SVG `chart` on shared
// axes; every path carries data-series and data-points, every point (up to MAX_CIRCLES) a circle.
function drawChart(chart, series) {
  chart.replaceChildren();
  const W = 600, H = 220, L = 52, R = 10, T = 10, B = 24;
  const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null && isFinite(p[1])));
  if (all.length === 0) {
    svg('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty'}, chart).textContent = 'no points yet';
  }
  let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
  let y0 = Math.min(...all.map((p) => p[1])), y1 = Math.max(...all.map((p) => p[1]));
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { y0 -= 1; y1 += 1; }
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg('line', {x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis'}, chart);
  svg('line', {x1: L, y1: T, x2: L, y2: H - B, class: 'axis'}, chart);
  if (all.length > 0) {
    svg('text', {x: L - 4, y: T + 8, 'text-anchor': 'end'}, chart).textContent = number(y1, 3);
    svg('text', {x: L - 4, y: H - B, 'text-anchor': 'end'}, chart).textContent = number(y0, 3);
    svg('text', {x: L, y: H - 8}, chart).textContent = 'step ' + x0;
    svg('text', {x: W - R, y: H - 8, 'text-anchor': 'end'}, chart).textContent = 'step ' + x1;
  }
  for (const s of series) {
    const pts = s.points.filter((p) => p[1] !== null && isFinite(p[1]));
    const d = pts.map((p, i) => (i ? 'L' : 'M') + sx(p[0]).toFixed(1) + ' ' + sy(p[1]).toFixed(1)).join(' ');
    svg('path', {d: d || 'M0 0', class: 'series ' + s.name, 'data-series': s.name, 'data-points': pts.length}, chart);
    if (pts.length <= MAX_CIRCLES) {
      for (const p of pts) {
        svg('circle', {cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: 2.5, class: 'point ' + s.name,
                       'data-step': p[0]}, chart);
      }
    }
  }
}

function render(v) {
  view = v;
  receivedAt = Date.now();
  renderJob(v);
  renderRanks(v);
  renderStragglers(v);
  drawChart($('chart-loss'), [{name: 'loss', points: v.loss}, {name: 'val_loss', points: v.val_loss}]);
  drawChart($('chart-tokens'), [{name: 'tokens_per_s', points: v.tokens_per_s}]);
}

async function refreshLog() {
  if (selectedRank === null) return;
  const rank = selectedRank;
  try {
    const res = await get('/api/logs?rank=' + rank + '&lines=200');
    const body = await res.text();
    if (rank !== selectedRank) return;
    const pre = $('log-text');
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = res.ok ? body : 'cannot read the log: ' + body;
    if (atEnd || pre.dataset.rank !== String(rank)) pre.scrollTop = pre.scrollHeight;  // follow the end
    pre.dataset.rank = rank;
  } catch (e) {
    $('log-text').textContent = 'cannot reach the launcher: ' + e;
  }
}

function showLog(rank) {
  selectedRank = rank;
  $('log-panel').hidden = false;
  $('log-title').textContent = 'rank ' + rank + ': the end of its output';
  for (const row of document.querySelectorAll('tr.rank')) row.classList.toggle('selected', Number(row.dataset.rank) === rank);
  refreshLog();
}

// The launcher exits once the job has finished: a lost connection after the finished view is
// the end, not a fault. The page keeps that view and stops reconnecting.
let ended = false;
let pollTimer = null;
let events = null;

function setConnection(live) {
  const c = $('connection');
  if (!live && finished(view)) {
    ended = true;
    if (events) events.close();
    if (pollTimer !== null) clearInterval(pollTimer);
    c.textContent = 'job finished; the launcher has exited';
    c.className = 'connection ended';
    return;
  }
  c.textContent = live ? 'live' : 'not connected (retrying)';
  c.className = 'connection' + (live ? ' live' : ' lost');
}

async function poll() {
  if (ended) return;
  try {
    const res = await get('/api/job');
    if (!res.ok) throw new Error(await res.text());
    render(await res.json());
    setConnection(true);
  } catch (e) {
    setConnection(false);
  }
}

function startPolling(ms) {
  poll();
  pollTimer = setInterval(poll, ms);
}

// ?poll=MS polls /api/job every MS milliseconds instead of listening to the event stream: for a
// proxy that buffers server-sent events, and for headless Chromium's virtual time, which stands
// still while a stream is open (tests/launcher/status/status_page_browser_test.cc).
function start() {
  const params = new URLSearchParams(location.search);
  if (params.has('rank')) showLog(Number(params.get('rank')));
  const pollMs = Number(params.get('poll'));
  if (pollMs > 0) {
    startPolling(Math.max(pollMs, 100));
  } else if (window.EventSource) {
    events = new EventSource('/api/events?token=' + encodeURIComponent(token));
    events.onmessage = (e) => { render(JSON.parse(e.data)); setConnection(true); };
    events.onerror = () => {
      setConnection(false);  // EventSource reconnects by itself after a dropped stream
      if (!ended && events.readyState === EventSource.CLOSED) {  // refused (a 503 when the streams are full): poll
        startPolling(POLL_MS);
      }
    };
  } else {
    startPolling(POLL_MS);
  }
  setInterval(() => { renderUptime(); if (!ended) refreshLog(); }, POLL_MS);
}

document.addEventListener('DOMContentLoaded', start);
