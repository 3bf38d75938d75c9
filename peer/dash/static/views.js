// needle dashboard views: the mesh-wide lists of groups and failed work
// (filters, cursor paging, cancel and retry), the schedules (next fire,
// recent firings, pause, resume, trigger), the audit trail, the external
// workers (shown when the peer serves GET /v1/workers) and the throughput
// chart of the overview. They use the helpers app.js exports as
// window.NeedleDash and are polled by its loop while they are on screen.
(() => {
  'use strict';

  const D = window.NeedleDash;
  if (!D) return;
  const { st, api, act, describe, el, svg, pill, progress, changed, replaceRows, kick, button,
    parseTime, fmtClock, fmtDur, fmtAgo } = D;
  const $ = (sel) => document.querySelector(sel);
  const enc = encodeURIComponent;
  const PAGE = 50;

  // ---- shared --------------------------------------------------------------

  function link(href, text, cls) {
    return el('a', { href, class: cls || 'gid', text });
  }
  function groupOf(taskID) {
    const i = String(taskID).lastIndexOf('.');
    return i > 0 ? taskID.slice(0, i) : taskID;
  }
  function when(s) {
    const t = parseTime(s);
    return t === null ? '—' : el('span', { title: s, text: fmtAgo(t) });
  }

  // keepFocus rebuilds a view and puts the focus back on the element with
  // the same data-focus-key, so polling does not steal it.
  function keepFocus(fn) {
    const a = document.activeElement;
    const key = a && a.dataset ? a.dataset.focusKey : null;
    fn();
    if (key) {
      const n = document.querySelector('[data-focus-key="' + CSS.escape(key) + '"]');
      if (n) n.focus();
    }
  }

  // ---- lists: groups and failed work --------------------------------------
  // One section serves both: #groups lists GET /v1/groups, #failed lists
  // GET /v1/tasks?state=FAILED with each task's error. Filters live in the
  // hash; the cursors of the pages seen are kept so "Newer" goes back.

  const GROUP_STATES = ['', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELED'];
  const FAILED_STATES = ['FAILED', 'CANCELED', 'FAILED,CANCELED'];
  const SINCE = { '5m': 5 * 60e3, '1h': 3600e3, '24h': 86400e3, '168h': 7 * 86400e3 };

  const list = {
    kind: null, // 'groups' or 'failed'
    filters: null, // {state, handler, since, q}
    cursors: [''], // the cursor of each page seen; the last is the current page's
    page: null, // the answer
    sinceAt: 0, // the created_after bound, fixed when the filters are applied
  };

  function listEnter(kind, params) {
    const f = {
      state: params.get('state') || (kind === 'failed' ? 'FAILED' : ''),
      handler: params.get('handler') || '',
      since: params.get('since') || '',
      q: params.get('q') || '',
    };
    const same = list.kind === kind && JSON.stringify(f) === JSON.stringify(list.filters);
    if (!same) {
      Object.assign(list, { kind, filters: f, cursors: [''], page: null, sinceAt: SINCE[f.since] ? Date.now() - SINCE[f.since] : 0 });
      changed('list', null);
      changed('list-head', null);
    }
    $('#list-h').textContent = kind === 'failed' ? 'Failed work' : 'Groups';
    const states = kind === 'failed' ? FAILED_STATES : GROUP_STATES;
    const sel = $('#f-state');
    sel.replaceChildren(...states.map((s) => el('option', { value: s, text: s ? s.replace(',', ' or ') : 'any state' })));
    sel.value = states.includes(f.state) ? f.state : states[0];
    $('#f-handler').value = f.handler;
    $('#f-since').value = f.since;
    $('#f-q').value = f.q;
    renderList();
  }

  function listQuery() {
    const f = list.filters;
    const q = new URLSearchParams();
    if (f.state) q.set('state', f.state);
    if (f.handler) q.set('handler', f.handler);
    if (f.q) q.set('q', f.q);
    if (list.sinceAt) q.set('created_after', new Date(list.sinceAt).toISOString());
    q.set('limit', String(PAGE));
    const c = list.cursors[list.cursors.length - 1];
    if (c) q.set('cursor', c);
    return (list.kind === 'failed' ? '/v1/tasks?' : '/v1/groups?') + q.toString();
  }

  async function listRefresh() {
    const kind = list.kind;
    const depth = list.cursors.length;
    const page = await api('GET', listQuery());
    if (list.kind !== kind || list.cursors.length !== depth) return;
    list.page = page;
    renderList();
  }

  function groupRow(g) {
    const acts = [];
    if (g.state === 'RUNNING') {
      acts.push(button('Cancel', { key: 'gcancel:' + g.id, cls: 'danger', confirm: 'Confirm cancel',
        title: 'cancel every unfinished task of this group' }, async () => {
        await act('POST', '/v1/groups/' + enc(g.id) + '/cancel');
        return 'canceled group ' + g.id;
      }));
    }
    if (g.state === 'FAILED' || g.state === 'CANCELED') {
      acts.push(button('Retry', { key: 'gretry:' + g.id, cls: 'primary', done: 'Retried',
        title: 'run the failed and canceled tasks of this group again' }, async () => {
        await act('POST', '/v1/groups/' + enc(g.id) + '/retry');
        return 'retried group ' + g.id;
      }));
    }
    const created = parseTime(g.created_at);
    const finished = parseTime(g.finished_at);
    return el('tr', { 'data-id': g.id },
      el('th', { scope: 'row' }, link('#group=' + enc(g.id), g.id)),
      el('td', { text: g.mode }),
      el('td', null, pill(g.state)),
      el('td', null, progress(g)),
      el('td', { class: 'mono', title: g.created_at || '' }, created === null ? '—' : fmtClock(created, false)),
      el('td', { class: 'num' }, created === null ? '—' : fmtDur((finished || Date.now()) - created) + (finished ? '' : '…')),
      el('td', { class: 'num actions' }, acts));
  }

  function failedRow(t) {
    const acts = [];
    if (t.state === 'FAILED' || t.state === 'CANCELED') {
      acts.push(button('Retry', { key: 'retry:' + t.id, cls: 'primary', done: 'Retried',
        title: 'run this task again' }, async () => {
        const r = await act('POST', '/v1/tasks/' + enc(t.id) + '/retry');
        return 'retried ' + t.id + ' (' + (r && r.state) + ')';
      }));
    } else if (!D.TERMINAL.has(t.state)) {
      acts.push(button('Cancel', { key: 'cancel:' + t.id, cls: 'danger', confirm: 'Confirm cancel' }, async () => {
        await act('POST', '/v1/tasks/' + enc(t.id) + '/cancel');
        return 'canceled ' + t.id;
      }));
    }
    const g = t.group || groupOf(t.id);
    return el('tr', { 'data-id': t.id },
      el('th', { scope: 'row' }, link('#task=' + enc(t.id), t.id)),
      el('td', { text: t.name || '' }),
      el('td', { text: t.handler }),
      el('td', null, pill(t.state)),
      el('td', { class: 'num', text: String(t.attempt ?? 0) }),
      el('td', { class: 'mono' }, when(t.finished_at)),
      el('td', { class: 'err error-text', title: t.error || '', text: t.error || '' }),
      el('td', { class: 'num actions' }, link('#group=' + enc(g), 'group', 'small'), ' ', acts));
  }

  function renderList() {
    const failed = list.kind === 'failed';
    const cols = failed ? ['Task', 'Name', 'Handler', 'State', 'Attempts', 'Finished', 'Error', '']
      : ['Group', 'Mode', 'State', 'Progress', 'Created', 'Took', ''];
    if (changed('list-head', list.kind)) {
      $('#list thead tr').replaceChildren(...cols.map((c) => el('th', { scope: 'col', class: c === 'Progress' ? 'wide' : null, text: c })));
    }
    const p = list.page;
    const items = p ? (failed ? p.tasks : p.groups) || [] : null;
    const miss = (p && p.missing_partitions) || [];
    $('#list-missing').hidden = miss.length === 0;
    $('#list-missing').textContent = miss.length
      ? 'No reachable peer owns ' + miss.length + (miss.length === 1 ? ' partition' : ' partitions') +
        ' (' + miss.slice(0, 12).join(', ') + (miss.length > 12 ? ', …' : '') + '): this list may be incomplete.' : '';
    const n = list.cursors.length;
    $('#page-first').disabled = n <= 1;
    $('#page-prev').disabled = n <= 1;
    $('#page-next').disabled = !(p && p.cursor);
    $('#page-info').textContent = items ? 'page ' + n + ' · ' + items.length + (items.length === 1 ? ' item' : ' items') +
      (p.cursor ? '' : ' · end') : 'loading…';
    const sig = JSON.stringify([list.kind, n, items && items.map((x) => [x.id, x.state, x.attempt, x.counts, x.error, x.finished_at])]);
    if (!changed('list', sig)) return;
    const tbody = $('#list tbody');
    // The failed view retries every FAILED and CANCELED task of the page
    // at once (after an outage, filtered by handler), as needle retry
    // does with filters.
    const retryable = failed && items ? items.filter((t) => t.state === 'FAILED' || t.state === 'CANCELED') : [];
    $('#list-bulk').replaceChildren(...(retryable.length > 1 ? [button('Retry these ' + retryable.length,
      { key: 'retry-page', cls: 'primary', confirm: 'Confirm: retry ' + retryable.length, done: 'Retried',
        title: 'run every FAILED and CANCELED task on this page again' },
      () => retryAll(retryable.map((t) => t.id)))] : []));
    keepFocus(() => {
      if (!items) replaceRows(tbody, [el('tr', null, el('td', { colspan: cols.length, class: 'muted', text: 'loading…' }))]);
      else if (!items.length) {
        replaceRows(tbody, [el('tr', null, el('td', { colspan: cols.length, class: 'muted empty-row',
          text: failed ? 'No failed work matches.' : 'No groups match.' }))]);
      } else replaceRows(tbody, items.map(failed ? failedRow : groupRow));
    });
  }

  // retryAll retries the tasks ids, four at a time. A 409 is a task
  // retried by someone else meanwhile; it fails only when nothing could be
  // retried for another reason.
  async function retryAll(ids) {
    const queue = ids.slice();
    let ok = 0, skipped = 0, errors = 0, first = null;
    async function next() {
      while (queue.length) {
        const id = queue.shift();
        try {
          await act('POST', '/v1/tasks/' + enc(id) + '/retry');
          ok++;
        } catch (e) {
          if (e.status === 409) skipped++;
          else { errors++; first = first || e; }
        }
      }
    }
    await Promise.all([next(), next(), next(), next()]);
    if (errors && !ok) throw first;
    kick();
    return 'retried ' + ok + ' of ' + ids.length + ' tasks' + (skipped ? ', ' + skipped + ' no longer retryable' : '') +
      (errors ? ', ' + errors + ' errors (' + describe(first) + ')' : '');
  }

  function applyFilters(e) {
    e.preventDefault();
    const q = new URLSearchParams();
    const state = $('#f-state').value;
    if (state && !(list.kind === 'failed' && state === 'FAILED')) q.set('state', state);
    for (const [k, id] of [['handler', '#f-handler'], ['since', '#f-since'], ['q', '#f-q']]) {
      const v = $(id).value.trim();
      if (v) q.set(k, v);
    }
    const s = q.toString();
    const h = '#' + list.kind + (s ? '?' + s : '');
    if (location.hash === h) { listEnter(list.kind, q); kick(); } else location.hash = h;
  }

  function page(step) {
    if (step === 'first') list.cursors = [''];
    else if (step === 'prev' && list.cursors.length > 1) list.cursors.pop();
    else if (step === 'next' && list.page && list.page.cursor) list.cursors.push(list.page.cursor);
    else return;
    list.page = null;
    renderList();
    kick();
  }

  // ---- schedules -----------------------------------------------------------

  const sched = { data: null };

  function schedWhen(s) {
    const spec = s.cron ? 'cron ' + s.cron : s.every ? 'every ' + s.every : '—';
    return spec + (s.timezone && s.timezone !== 'UTC' && s.cron ? ' (' + s.timezone + ')' : '');
  }

  function schedRow(s) {
    const next = parseTime(s.next);
    const fires = (s.firings || []).slice(-6).reverse();
    const id = enc(s.id);
    const acts = [
      s.paused
        ? button('Resume', { key: 'resume:' + s.id, cls: 'primary' }, async () => {
          await act('POST', '/v1/schedules/' + id + '/resume');
          return 'resumed ' + (s.name || s.id);
        })
        : button('Pause', { key: 'pause:' + s.id }, async () => {
          await act('POST', '/v1/schedules/' + id + '/pause');
          return 'paused ' + (s.name || s.id);
        }),
      button('Trigger', { key: 'trigger:' + s.id, title: 'fire now (the next regular tick does not move)' }, async () => {
        const r = await act('POST', '/v1/schedules/' + id + '/trigger');
        return 'fired ' + (r && r.group);
      }),
    ];
    return el('tr', { 'data-id': s.id },
      el('th', { scope: 'row' }, el('div', { text: s.name || '(unnamed)' }), el('div', { class: 'gid muted', text: s.id })),
      el('td', { class: 'mono', text: schedWhen(s) }),
      el('td', null, s.paused ? pill('WAITING', 'paused') : pill('SUCCEEDED', 'active')),
      el('td', { class: 'mono', title: s.next || '' }, s.paused || next === null ? '—'
        : [fmtClock(next, false), el('span', { class: 'muted', text: ' in ' + fmtDur(Math.max(0, next - Date.now())) })]),
      el('td', { class: 'firings' }, fires.length ? fires.map((f) => el('a', {
        href: '#group=' + enc(f.group), class: 'firing s-' + (f.state || 'UNKNOWN'),
        title: f.group + ' · ' + (f.state || '') + (f.manual ? ' · manual' : '') + ' · ' + f.at,
        text: fmtClock(parseTime(f.at), false) + (f.manual ? '*' : ''),
      })) : el('span', { class: 'muted', text: 'none yet' })),
      el('td', { class: 'num actions' }, acts));
  }

  function renderSchedules() {
    const list = (sched.data && sched.data.schedules) || null;
    $('#schedules-meta').textContent = list ? list.length + (list.length === 1 ? ' schedule' : ' schedules') : '';
    const sig = JSON.stringify([list, Math.floor(Date.now() / 1000)]);
    if (!changed('schedules', sig)) return;
    const tbody = $('#schedules tbody');
    keepFocus(() => {
      if (!list) replaceRows(tbody, [el('tr', null, el('td', { colspan: 6, class: 'muted', text: 'loading…' }))]);
      else if (!list.length) replaceRows(tbody, [el('tr', null, el('td', { colspan: 6, class: 'muted empty-row', text: 'No schedules.' }))]);
      else replaceRows(tbody, list.slice().sort((a, b) => String(a.name).localeCompare(String(b.name))).map(schedRow));
    });
  }

  // ---- audit ---------------------------------------------------------------

  const audit = { data: null, filter: '' };

  function subjectLink(s) {
    if (!s) return '';
    if (/^[A-Za-z0-9~_-]+\.\d+$/.test(s)) return link('#task=' + enc(s), s);
    if (/^(g|k)[0-9a-f]{8,}/.test(s) || s.includes('~')) return link('#group=' + enc(s), s);
    if (/^s[0-9a-f]{8,}$/.test(s)) return link('#schedules', s);
    return el('span', { class: 'gid', text: s });
  }

  function renderAudit() {
    const all = (audit.data && audit.data.entries) || null;
    const f = audit.filter.toLowerCase();
    const rows = all && all.filter((e) => !f || JSON.stringify(e).toLowerCase().includes(f));
    $('#audit-meta').textContent = all ? (f ? rows.length + ' of ' : '') + all.length + ' entries' : '';
    if (!changed('audit', JSON.stringify([rows, f]))) return;
    const tbody = $('#audit tbody');
    if (!rows) replaceRows(tbody, [el('tr', null, el('td', { colspan: 4, class: 'muted', text: 'loading…' }))]);
    else if (!rows.length) replaceRows(tbody, [el('tr', null, el('td', { colspan: 4, class: 'muted empty-row', text: 'Nothing recorded.' }))]);
    else {
      replaceRows(tbody, rows.map((e) => el('tr', null,
        el('td', { class: 'mono', title: e.at }, fmtClock(parseTime(e.at))),
        el('td', null, el('span', { class: 'ev-type', text: e.action })),
        el('td', null, subjectLink(e.subject)),
        el('td', { class: 'mono', text: e.by || '—' }))));
    }
  }

  // ---- workers -------------------------------------------------------------
  // GET /v1/workers lists the external workers of the whole mesh. A peer
  // that does not serve it (an older one) answers 404: the view and its
  // tab show only when the route answers.

  const workers = { data: null, known: null, probed: -1e9 };

  async function probeWorkers(force) {
    if (!force && Date.now() - workers.probed < 30e3) return;
    workers.probed = Date.now();
    try {
      workers.data = await api('GET', '/v1/workers');
      workers.known = true;
    } catch (e) {
      if (e.status === 404 || e.status === 405) workers.known = false;
      else if (force) throw e;
    }
    document.querySelector('#nav a[data-view="workers"]').hidden = !workers.known;
  }

  function workerRow(w) {
    const seen = parseTime(w.last_seen);
    // slots: the worker's capacity; absent for a worker of an older
    // release, which does not say.
    const running = w.running || 0, slots = w.slots;
    return el('tr', { 'data-id': w.id },
      el('th', { scope: 'row', class: 'gid', text: w.id }),
      el('td', { class: 'mono', title: w.peer || '', text: D.shortPeer(w.peer) || '—' }),
      el('td', null, (w.handlers || []).map((h, i) => [i ? ', ' : '', link('#groups?handler=' + enc(h), h)])),
      el('td', { class: 'mono', text: (w.labels || []).join(', ') || '—' }),
      el('td', null, el('div', { class: 'bar-cell' },
        D.bar([['b-load', running]], slots || Math.max(running, 1),
          slots ? running + ' of ' + slots + ' busy' : running + ' running; its slots unknown (an older worker)'),
        el('span', { class: 'n', text: running + ' / ' + (slots || '—') }))),
      el('td', null, w.polling ? pill('SUCCEEDED', 'polling') : pill('RUNNING', 'working')),
      el('td', { class: 'muted', title: w.last_seen || '', text: fmtAgo(seen) }));
  }

  function renderWorkers() {
    const tbody = $('#workers tbody');
    if (workers.known === false) {
      $('#workers-meta').textContent = 'this peer serves no GET /v1/workers';
      replaceRows(tbody, [el('tr', null, el('td', { colspan: 7, class: 'muted empty-row', text: 'No workers view on this peer.' }))]);
      return;
    }
    const d = workers.data;
    const rows = (d && d.workers) || [];
    const unreach = (d && d.unreachable) || [];
    $('#workers-meta').textContent = d ? rows.length + (rows.length === 1 ? ' live worker' : ' live workers') : '';
    $('#workers-missing').hidden = unreach.length === 0;
    $('#workers-missing').textContent = unreach.length ? 'Peers that did not answer (their workers are not listed): ' +
      unreach.map(D.shortPeer).join(', ') : '';
    if (!changed('workers', JSON.stringify([rows, Math.floor(Date.now() / 5000)]))) return;
    replaceRows(tbody, rows.length ? rows.slice().sort((a, b) => String(a.id).localeCompare(String(b.id))).map(workerRow)
      : [el('tr', null, el('td', { colspan: 7, class: 'muted empty-row',
        text: 'No live workers. A worker in any language polls POST /v1/workers/poll for the handlers no peer registered.' }))]);
  }

  // ---- throughput ------------------------------------------------------------
  // Tasks finished per second by state, over the last WINDOW: sampled from
  // the mesh-wide totals of GET /v1/stats every SAMPLE_MS (or ten times as
  // long as the last answer took, at most 30 s: counting a large mesh's
  // tasks is not free) while the page is open (a rise of the SUCCEEDED, FAILED or CANCELED total over one sample
  // is that many finishes), and filled in before the page opened from one
  // page of GET /v1/tasks finished in the window when that page holds them
  // all.

  const WINDOW = 5 * 60e3;
  const SAMPLE_MS = 2000;
  const DONE = ['SUCCEEDED', 'FAILED', 'CANCELED'];
  const tp = { last: null, lastAt: 0, every: SAMPLE_MS, points: [], stats: null, backfilled: null, backfilling: false, backfills: 0, since: Date.now() };

  async function sample() {
    const now = Date.now();
    if (now - tp.lastAt < tp.every - 100) return;
    tp.lastAt = now;
    const s = await api('GET', '/v1/stats');
    tp.every = Math.min(30e3, Math.max(SAMPLE_MS, 10 * (Date.now() - now)));
    tp.stats = s;
    const totals = s.totals || {};
    if (tp.last) {
      const dt = Math.max(1, now - tp.last.at);
      const pt = { at: now, dt };
      for (const k of DONE) pt[k] = Math.max(0, (totals[k] || 0) - (tp.last.totals[k] || 0)) * 1000 / dt;
      tp.points.push(pt);
    }
    tp.last = { at: now, totals };
    while (tp.points.length && tp.points[0].at < now - WINDOW) tp.points.shift();
    // The backfill is tried again on the next samples while it could not be
    // made (an error, a timeout, a partition not answering), not once only:
    // it fills in only what came before the first sample, which no later
    // sample can count.
    if (tp.backfilled !== true && !tp.backfilling && tp.backfills < 5) await backfill(now);
    if (st.view === 'overview') { renderChart(); renderHandlers(); }
    const dl = $('#handler-names');
    const names = (s.handlers || []).map((h) => h.handler);
    if (changed('handler-names', names.join('\n'))) dl.replaceChildren(...names.map((n) => el('option', { value: n })));
  }

  async function backfill(now) {
    tp.backfilled = false;
    tp.backfills++;
    const q = new URLSearchParams({ state: DONE.join(','), finished_after: new Date(now - WINDOW).toISOString(), limit: '1000' });
    let page;
    tp.backfilling = true;
    try { page = await api('GET', '/v1/tasks?' + q.toString()); } catch (_) { return; } finally { tp.backfilling = false; }
    if (page.cursor || (page.missing_partitions || []).length) return; // more than one page: sampled only
    // One bar per second up to where the sampled points begin (the first
    // sample's totals already count every task finished before it); the
    // second that sample fell in is cut short there, so a task finished in
    // it is drawn too, at its rate over that part of the second.
    const first = tp.points.length ? tp.points[0].at - tp.points[0].dt : now;
    const buckets = new Map();
    for (const t of page.tasks || []) {
      const f = parseTime(t.finished_at);
      if (f === null || f > first) continue;
      const start = Math.floor(f / 1000) * 1000;
      const at = Math.min(start + 1000, first);
      const b = buckets.get(start) || { at, dt: Math.max(1, at - start), SUCCEEDED: 0, FAILED: 0, CANCELED: 0 };
      if (b[t.state] !== undefined) b[t.state]++;
      buckets.set(start, b);
    }
    const old = [...buckets.values()].sort((a, b) => a.at - b.at);
    for (const b of old) for (const k of DONE) b[k] = b[k] * 1000 / b.dt;
    tp.points.unshift(...old);
    tp.backfilled = true;
    tp.since = now - WINDOW;
  }

  function renderChart() {
    const W = 720;
    const H = 150;
    const P = { l: 40, r: 8, t: 10, b: 22 };
    const now = Date.now();
    const pts = tp.points.filter((p) => p.at > now - WINDOW);
    const max = Math.max(1, ...pts.map((p) => DONE.reduce((a, k) => a + p[k], 0)));
    const nice = niceMax(max);
    const x = (t) => P.l + (W - P.l - P.r) * (1 - (now - t) / WINDOW);
    const y = (v) => H - P.b - (H - P.t - P.b) * (v / nice);
    const total = pts.reduce((a, p) => a + DONE.reduce((b, k) => b + p[k] * p.dt / 1000, 0), 0);
    const last = pts.length ? DONE.reduce((a, k) => a + pts[pts.length - 1][k], 0) : 0;
    $('#chart-meta').textContent = 'tasks finished per second, last 5 minutes · now ' + last.toFixed(1) + '/s · ' +
      Math.round(total) + ' in the window' + (tp.backfilled ? '' : ' · since ' + fmtClock(tp.since, false));
    const pic = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart-svg', role: 'img',
      'aria-label': 'tasks finished per second by state over the last 5 minutes' });
    for (const v of [0, nice / 2, nice]) {
      pic.append(svg('line', { class: 'grid-line', x1: P.l, x2: W - P.r, y1: y(v), y2: y(v) }),
        svg('text', { class: 'axis', x: P.l - 5, y: y(v) + 3, 'text-anchor': 'end', text: fmtRate(v) }));
    }
    for (const m of [5, 4, 3, 2, 1, 0]) {
      pic.append(svg('text', { class: 'axis', x: x(now - m * 60e3), y: H - 6, 'text-anchor': m === 0 ? 'end' : 'middle',
        text: m ? '-' + m + 'm' : 'now' }));
    }
    for (const p of pts) {
      const x1 = Math.max(P.l, x(p.at - p.dt));
      const w = Math.max(1, x(p.at) - x1 - 0.5);
      let base = 0;
      for (const k of DONE) {
        if (!p[k]) continue;
        pic.append(svg('rect', { class: 'b-' + k, x: x1.toFixed(1), y: y(base + p[k]).toFixed(1), width: w.toFixed(1),
          height: Math.max(0.5, y(base) - y(base + p[k])).toFixed(1) },
        svg('title', { text: fmtClock(p.at, false) + ' · ' + p[k].toFixed(1) + '/s ' + k.toLowerCase() })));
        base += p[k];
      }
    }
    const legend = el('div', { class: 'legend' }, DONE.map((k) => pill(k, k.toLowerCase())));
    $('#chart').replaceChildren(pic, legend);
  }

  function niceMax(v) {
    const e = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * e >= v) return m * e;
    return 10 * e;
  }
  function fmtRate(v) {
    return v >= 1000 ? (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k' : v >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(1);
  }

  function renderHandlers() {
    const hs = (tp.stats && tp.stats.handlers) || [];
    if (!changed('handlers', JSON.stringify(hs))) return;
    const tbody = $('#handlers tbody');
    if (!hs.length) {
      replaceRows(tbody, [el('tr', null, el('td', { colspan: 4, class: 'muted', text: 'no tasks yet' }))]);
      return;
    }
    replaceRows(tbody, hs.map((h) => {
      const c = h.counts || {};
      const total = Object.values(c).reduce((a, b) => a + b, 0);
      const age = h.oldest_ready_age_seconds || 0;
      return el('tr', null,
        el('th', { scope: 'row', class: 'gid' }, link('#groups?handler=' + enc(h.handler), h.handler),
          h.waiting ? el('div', { class: 'waiting-note', text: h.waiting }) : null),
        el('td', null, progress({ counts: c, total })),
        el('td', { class: 'num' }, c.FAILED ? link('#failed?handler=' + enc(h.handler), String(c.FAILED), 's-FAILED') : '0'),
        el('td', { class: 'num', text: age ? fmtDur(age * 1000) : '—' }));
    }));
  }

  // ---- registration ----------------------------------------------------------

  D.register('groups', { enter: (p) => listEnter('groups', p), refresh: listRefresh });
  D.register('failed', { enter: (p) => listEnter('failed', p), refresh: listRefresh });
  D.register('schedules', {
    enter: () => renderSchedules(),
    refresh: async () => { sched.data = await api('GET', '/v1/schedules'); renderSchedules(); },
  });
  D.register('audit', {
    enter: () => renderAudit(),
    refresh: async () => { audit.data = await api('GET', '/v1/audit?limit=500'); renderAudit(); },
  });
  D.register('workers', {
    enter: () => renderWorkers(),
    refresh: async () => { await probeWorkers(true); renderWorkers(); },
  });
  D.hook(async () => {
    await probeWorkers(false);
    try { await sample(); } catch (_) { /* the status line shows the peer's errors */ }
  });

  $('#list-filters').addEventListener('submit', applyFilters);
  $('#page-first').addEventListener('click', () => page('first'));
  $('#page-prev').addEventListener('click', () => page('prev'));
  $('#page-next').addEventListener('click', () => page('next'));
  $('#audit-filter').addEventListener('input', (e) => { audit.filter = e.currentTarget.value.trim(); renderAudit(); });
  window.addEventListener('hashchange', () => { if (st.view === 'overview') { renderChart(); renderHandlers(); } });
  renderChart();
})();
