// needle dashboard: polls this peer's HTTP API (same origin) and renders the
// mesh, the tracked groups, one group's DAG and one task's history, logs and
// actions. The other views (lists, failed work, schedules, audit, workers,
// the throughput chart) live in views.js and register themselves through
// window.NeedleDash. Vanilla JS, no dependencies; the page's CSP allows
// nothing but 'self'.
(() => {
  'use strict';

  const POLL_MS = 1000;
  const TIMEOUT_MS = 8000;
  const FLASH_MS = 15000; // an action's failure stays in the status line this long
  const MAX_TRACKED = 50;
  const MAX_DAG = 600;
  const LS_GROUPS = 'needle.dash.groups';
  const LS_TOKEN = 'needle.dash.token';
  const STATES = ['PENDING', 'READY', 'RUNNING', 'WAITING', 'SUCCEEDED', 'FAILED', 'CANCELED'];
  const BAR_ORDER = ['SUCCEEDED', 'FAILED', 'CANCELED', 'RUNNING', 'READY', 'WAITING', 'PENDING'];
  const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELED']);
  const VIEWS = new Set(['overview', 'groups', 'failed', 'task', 'schedules', 'audit', 'workers']);
  const MAX_LOG_LINES = 5000;
  const EXAMPLE = {
    mode: 'dag',
    tasks: [
      { name: 'fetch', handler: 'sleep', payload: { ms: 300 } },
      { name: 'parse', handler: 'echo', payload: 1, deps: ['fetch'] },
      { name: 'sum', handler: 'echo', payload: 2, deps: ['parse'] },
    ],
  };

  const $ = (sel) => document.querySelector(sel);
  // The SVG namespace, taken from the parser rather than spelled out.
  const SVG_NS = (() => {
    const d = document.createElement('div');
    d.innerHTML = '<svg></svg>';
    return d.firstChild.namespaceURI;
  })();

  // ---- state ---------------------------------------------------------------

  const st = {
    tracked: loadTracked(), // group ids, newest first
    groups: new Map(), // id -> {data, missing, fetchedTick}
    peers: null,
    openGroup: null, // id
    group: null, // full group with tasks
    openTask: null, // id
    task: null,
    events: null,
    errors: { peers: null, groups: null, group: null, task: null, view: null },
    view: 'overview', // the hash route: overview, groups, failed, task, schedules, audit, workers
    logs: null, // {task, attempt, runs, lines, done, terminal, dropped, err, ctl, following}
    follow: true, // the "follow live" checkbox
    paused: false,
    tick: 0,
    updated: null,
    note: null, // transient info for the status line
    flash: null, // an action's failure, shown in the status line (flash)
    flashAt: 0, // when flash was set (Date.now())
  };

  function loadTracked() {
    try {
      const v = JSON.parse(localStorage.getItem(LS_GROUPS) || '[]');
      return Array.isArray(v) ? v.filter((x) => typeof x === 'string' && x).slice(0, MAX_TRACKED) : [];
    } catch (_) {
      return [];
    }
  }
  function saveTracked() {
    try { localStorage.setItem(LS_GROUPS, JSON.stringify(st.tracked)); } catch (_) { /* private mode */ }
  }
  function token() {
    try { return localStorage.getItem(LS_TOKEN) || ''; } catch (_) { return ''; }
  }
  function setToken(t) {
    try {
      if (t) localStorage.setItem(LS_TOKEN, t); else localStorage.removeItem(LS_TOKEN);
    } catch (_) { /* ignore */ }
  }

  function track(id) {
    id = (id || '').trim();
    if (!id) return;
    st.tracked = [id, ...st.tracked.filter((x) => x !== id)].slice(0, MAX_TRACKED);
    saveTracked();
  }
  function untrack(id) {
    st.tracked = st.tracked.filter((x) => x !== id);
    st.groups.delete(id);
    saveTracked();
    if (st.openGroup === id) openGroup(null);
    renderGroups();
  }

  // ---- API -----------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    let res;
    try {
      res = await fetch(path, {
        method, headers, signal: ctl.signal, cache: 'no-store', credentials: 'same-origin',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, 'network', e.name === 'AbortError' ? 'request timed out' : 'cannot reach the peer');
    } finally {
      clearTimeout(timer);
    }
    let data = null;
    const text = await res.text();
    if (text) {
      try { data = JSON.parse(text); } catch (_) { data = null; }
    }
    if (!res.ok) {
      const e = (data && data.error) || {};
      throw new ApiError(res.status, e.code || 'http_' + res.status, e.message || res.statusText || 'HTTP ' + res.status);
    }
    return data;
  }

  // ---- token --------------------------------------------------------------
  // A peer run with NEEDLE_API_TOKEN answers 401 without it: the dashboard
  // asks for the token in a dialog (once per failure, not on every poll) and
  // keeps it in this browser's localStorage.

  let asking = null; // the pending dialog's promise
  let askedFor = null; // the token value the last dialog was shown for

  function askToken(why) {
    if (asking) return asking;
    const d = $('#token-dialog');
    $('#token-dialog-why').textContent = why;
    $('#token-dialog-input').value = '';
    askedFor = token();
    asking = new Promise((resolve) => {
      const done = (ok) => {
        d.removeEventListener('close', onClose);
        asking = null;
        resolve(ok);
      };
      const onClose = () => {
        const v = $('#token-dialog-input').value.trim();
        if (d.returnValue === 'ok' && v) {
          setToken(v);
          $('#token').value = v;
          st.note = 'token set';
          done(true);
          kick();
        } else {
          done(false);
        }
      };
      d.addEventListener('close', onClose);
      d.returnValue = '';
      if (typeof d.showModal === 'function') d.showModal(); else d.setAttribute('open', '');
    });
    return asking;
  }

  // noteAuth opens the token dialog when a poll was refused for want of the
  // right token, unless it was already shown for the token in use.
  function noteAuth(err) {
    if (err && err.status === 401 && askedFor !== token() && !asking) {
      askToken(token() ? 'The API token in use was refused. Enter the right one.'
        : 'This peer runs with an API token. Enter it to go on; it is kept in this browser only.');
    }
  }

  // act sends a write (cancel, retry, pause, ...). A 401 asks for the token
  // and, once given, sends the request again.
  async function act(method, path, body) {
    try {
      return await api(method, path, body);
    } catch (e) {
      if (e.status !== 401) throw e;
      const ok = await askToken((token() ? 'The API token was refused. ' : 'This action needs the API token. ') +
        method + ' ' + path);
      if (!ok) throw e;
      return api(method, path, body);
    }
  }

  function describe(err) {
    if (!(err instanceof ApiError)) return String(err && err.message || err);
    switch (err.status) {
      case 0: return err.message;
      case 401: return (token() ? 'wrong API token' : 'this peer needs an API token') + ' — set a token (top right)';
      case 403: {
        // A token without the scope the request needs: say which to set.
        const m = /it needs scope (\w+)/.exec(err.message);
        return err.status + ' ' + err.code + ': ' + err.message +
          (m ? ' — set a token with the ' + m[1] + ' scope (API token, top right)' : '');
      }
      case 503: return 'unavailable: ' + err.message;
      default: return err.status + ' ' + err.code + ': ' + err.message;
    }
  }

  const enc = encodeURIComponent;

  async function refreshPeers() {
    try {
      st.peers = await api('GET', '/v1/peers');
      st.errors.peers = null;
    } catch (e) {
      st.errors.peers = e;
      noteAuth(e);
    }
    renderPeers();
  }

  async function refreshGroups() {
    const ids = st.tracked.filter((id) => {
      if (id === st.openGroup) return false; // fetched with its tasks
      const g = st.groups.get(id);
      if (!g) return true;
      // Finished or unknown groups change rarely: look again every 10 ticks.
      const settled = g.missing || (g.data && TERMINAL.has(g.data.state));
      return !settled || st.tick - g.fetchedTick >= 10;
    });
    let err = null;
    await Promise.all(ids.map(async (id) => {
      try {
        const data = await api('GET', '/v1/groups/' + enc(id) + '?tasks=false');
        st.groups.set(id, { data, missing: false, fetchedTick: st.tick });
      } catch (e) {
        if (e.status === 404 || e.status === 400) {
          st.groups.set(id, { data: null, missing: true, fetchedTick: st.tick, why: e.message });
        } else {
          err = err || e;
        }
      }
    }));
    st.errors.groups = err;
    renderGroups();
  }

  async function refreshOpen() {
    const jobs = [];
    const gid = st.openGroup;
    if (gid) {
      jobs.push((async () => {
        try {
          const data = await api('GET', '/v1/groups/' + enc(gid) + '?tasks=true');
          if (st.openGroup !== gid) return;
          st.group = data;
          st.groups.set(gid, { data, missing: false, fetchedTick: st.tick });
          st.errors.group = null;
        } catch (e) {
          if (st.openGroup !== gid) return;
          if (e.status === 404 || e.status === 400) {
            st.groups.set(gid, { data: null, missing: true, fetchedTick: st.tick, why: e.message });
          }
          st.errors.group = e;
        }
        renderGroup();
        renderGroups();
      })());
    }
    const tid = st.openTask;
    if (tid) {
      jobs.push((async () => {
        try {
          const [task, ev] = await Promise.all([
            api('GET', '/v1/tasks/' + enc(tid)),
            api('GET', '/v1/tasks/' + enc(tid) + '/events'),
          ]);
          if (st.openTask !== tid) return;
          st.task = task;
          st.events = (ev && ev.events) || [];
          st.errors.task = null;
        } catch (e) {
          if (st.openTask !== tid) return;
          st.errors.task = e;
        }
        renderTask();
        await refreshLogs(tid);
      })());
    }
    await Promise.all(jobs);
  }

  // ---- polling -------------------------------------------------------------

  let timer = 0;
  let inFlight = false;
  let again = false;

  function kick() {
    if (inFlight) { again = true; return; }
    clearTimeout(timer);
    timer = 0;
    run();
  }

  async function run() {
    timer = 0;
    if (document.hidden || st.paused) { renderStatus(); return; } // visibilitychange / unpause kick
    inFlight = true;
    try {
      await Promise.all([refreshPeers(), st.view === 'overview' ? refreshGroups() : null,
        refreshOpen(), refreshView(), ...hooks.map((h) => h())]);
      st.updated = new Date();
      st.tick++;
    } finally {
      inFlight = false;
    }
    renderStatus();
    if (again) { again = false; kick(); return; }
    timer = setTimeout(run, POLL_MS);
  }

  // ---- DOM helpers ---------------------------------------------------------

  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    setAttrs(n, attrs);
    append(n, kids);
    return n;
  }
  function svg(tag, attrs, ...kids) {
    const n = document.createElementNS(SVG_NS, tag);
    setAttrs(n, attrs);
    append(n, kids);
    return n;
  }
  function setAttrs(n, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') n.textContent = v;
      else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
      else n.setAttribute(k, v === true ? '' : String(v));
    }
  }
  function append(n, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      n.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
  }
  function pill(state, label) {
    return el('span', { class: 'pill s-' + state, text: label || state });
  }
  function shortPeer(id) {
    if (!id) return '';
    return id.length > 14 ? '…' + id.slice(-10) : id;
  }
  function parseTime(s) {
    if (!s) return null;
    // Trim nanoseconds to milliseconds: Date.parse wants at most 3 digits.
    const t = Date.parse(String(s).replace(/(\.\d{3})\d+/, '$1'));
    return Number.isNaN(t) || t <= 0 ? null : t;
  }
  function pad(n, w = 2) { return String(n).padStart(w, '0'); }
  function fmtClock(ms, withMs = true) {
    if (ms === null) return '—';
    const d = new Date(ms);
    const s = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    return withMs ? s + '.' + pad(d.getMilliseconds(), 3) : s;
  }
  function fmtDur(ms) {
    if (ms === null || ms === undefined || ms < 0) return '—';
    if (ms < 1) return '<1ms';
    if (ms < 1000) return Math.round(ms) + 'ms';
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + 's';
    const m = Math.floor(ms / 60000);
    if (m < 60) return m + 'm' + pad(Math.floor((ms % 60000) / 1000)) + 's';
    return Math.floor(m / 60) + 'h' + pad(m % 60) + 'm';
  }
  function fmtAgo(ms) {
    if (ms === null) return '—';
    const d = Date.now() - ms;
    if (d < 1500) return 'just now';
    return fmtDur(Math.max(d, 0)).replace(/\.\d+s$/, 's') + ' ago';
  }
  function json(v, max = 160) {
    let s;
    try { s = JSON.stringify(v); } catch (_) { s = String(v); }
    if (s === undefined) s = 'null';
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  }
  function bar(parts, total, label) {
    const b = el('div', { class: 'bar', role: 'img', 'aria-label': label });
    for (const [cls, n] of parts) {
      if (!n || !total) continue;
      const s = el('span', { class: cls });
      s.style.width = Math.min(100, (100 * n) / total).toFixed(2) + '%';
      b.append(s);
    }
    return b;
  }
  function replaceRows(tbody, rows) {
    tbody.replaceChildren(...rows);
  }
  // changed reports whether the signature of a view changed since the last
  // render, so that views with buttons are not rebuilt (and lose focus) on
  // every poll when nothing moved.
  const sigs = new Map();
  function changed(view, sig) {
    if (sigs.get(view) === sig) return false;
    sigs.set(view, sig);
    return true;
  }

  // ---- status line ---------------------------------------------------------

  function renderStatus() {
    const s = $('#status');
    // A group or task that does not exist is shown where it is opened, not here.
    const local = (e) => (e && e.status !== 404 && e.status !== 400 ? e : null);
    const err = st.errors.peers || st.errors.groups || local(st.errors.group) || local(st.errors.task) ||
      st.errors.view;
    let cls = 'ok';
    let msg;
    if (st.paused) {
      cls = 'paused'; msg = 'paused';
    } else if (document.hidden) {
      cls = 'paused'; msg = 'paused while the tab is hidden';
    } else if (err) {
      cls = 'err'; msg = describe(err);
    } else if (st.updated) {
      msg = 'live · updated ' + fmtClock(st.updated.getTime(), false);
    } else {
      cls = ''; msg = 'connecting…';
    }
    if (st.note && !err) msg += ' · ' + st.note;
    if (st.flash) { cls = 'err'; msg = st.flash; }
    s.className = 'status ' + cls;
    s.textContent = msg;
  }

  // ---- peers ---------------------------------------------------------------

  function renderPeers() {
    const tbody = $('#peers tbody');
    const p = st.peers;
    if (!p) {
      if (st.errors.peers) replaceRows(tbody, [el('tr', null, el('td', { colspan: 7, class: 'muted', text: 'no data' }))]);
      return;
    }
    $('#self').textContent = p.self ? 'peer ' + shortPeer(p.self) : '';
    $('#self').title = p.self || '';
    const peers = (p.peers || []).slice().sort((a, b) =>
      (b.id === p.self) - (a.id === p.self) || String(a.id).localeCompare(String(b.id)));
    const maxReady = Math.max(1, ...peers.map((x) => (x.load && x.load.ready) || 0));
    const node = p.node || {};
    const rows = peers.map((peer) => {
      const self = peer.id === p.self;
      const load = peer.load || {};
      const slots = load.slots || 0;
      const running = load.running || 0;
      const ready = load.ready || 0;
      const seen = parseTime(peer.last_seen);
      return el('tr', { class: self ? 'self-row' : null },
        el('th', { scope: 'row', class: 'gid', title: [peer.id, ...(peer.addrs || [])].join('\n') },
          shortPeer(peer.id), self ? el('span', { class: 'tag', text: 'self' }) : null),
        el('td', null, pill(peer.state || 'UNKNOWN'), peer.conflict ? el('span', { class: 'tag conflict', text: 'conflict',
          title: 'two live processes run as this peer id: its data dir was copied to another host (see the peers\' logs)' }) : null),
        el('td', peer.version ? { class: 'version', text: peer.version } : { class: 'version muted', text: 'unknown',
          title: 'an older needle, or not heard from yet' }),
        el('td', null, el('div', { class: 'bar-cell' },
          bar([['b-ready', ready]], maxReady, ready + ' ready'),
          el('span', { class: 'n', text: String(ready) }))),
        el('td', null, el('div', { class: 'bar-cell' },
          bar([['b-load', running]], slots || 1, running + ' of ' + slots + ' slots busy'),
          el('span', { class: 'n', text: running + ' / ' + slots }))),
        el('td', { class: 'num', title: self ? 'partitions led / replicas held' : 'known for this peer only' },
          self && node.Leading !== undefined ? node.Leading + ' / ' + (node.Held || 0) : '—'),
        el('td', { class: 'muted' }, self ? 'self' : fmtAgo(seen)));
    });
    replaceRows(tbody, rows);
    const counts = {};
    for (const x of peers) counts[x.state] = (counts[x.state] || 0) + 1;
    // During a rolling upgrade the peers run more than one version.
    const versions = new Set(peers.map((x) => x.version || 'unknown'));
    $('#node-summary').textContent = peers.length + (peers.length === 1 ? ' peer' : ' peers') +
      Object.keys(counts).sort().map((k) => ' · ' + counts[k] + ' ' + k).join('') +
      (versions.size > 1 ? ' · ' + versions.size + ' versions' : '');
    renderRing(p, peers);
  }

  // hash01 places a peer id on the ring picture (FNV-1a, for display only).
  function hash01(s) {
    let h = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h / 0x100000000;
  }

  function renderRing(p, peers) {
    const node = p.node || {};
    const stats = p.stats || {};
    const box = $('#ring');
    const R = 34;
    const C = 44;
    const pic = svg('svg', { width: 88, height: 88, viewBox: '0 0 88 88', role: 'img',
      'aria-label': 'ring with ' + peers.length + ' peers' });
    pic.append(svg('circle', { class: 'track', cx: C, cy: C, r: R, 'stroke-width': 6 }));
    const total = node.Partitions || 0; // not in the API (yet): draw the arcs only when known
    if (total > 0) {
      const circ = 2 * Math.PI * R;
      const held = svg('circle', { class: 'arc-held', cx: C, cy: C, r: R, 'stroke-width': 6,
        'stroke-dasharray': (circ * (node.Held || 0) / total) + ' ' + circ, transform: 'rotate(-90 44 44)' });
      const lead = svg('circle', { class: 'arc-lead', cx: C, cy: C, r: R, 'stroke-width': 6,
        'stroke-dasharray': (circ * (node.Leading || 0) / total) + ' ' + circ, transform: 'rotate(-90 44 44)' });
      pic.append(held, lead);
    }
    for (const peer of peers) {
      const a = hash01(peer.id || '') * 2 * Math.PI - Math.PI / 2;
      const self = peer.id === p.self;
      pic.append(svg('circle', {
        class: 'dot ' + (peer.state || '') + (self ? ' self' : ''),
        cx: (C + R * Math.cos(a)).toFixed(1), cy: (C + R * Math.sin(a)).toFixed(1), r: self ? 6 : 4.5,
      }, svg('title', { text: shortPeer(peer.id) + ' (' + peer.state + ')' })));
    }
    pic.append(svg('text', { class: 'ring-n', x: C, y: C + 1, 'text-anchor': 'middle', 'dominant-baseline': 'middle',
      text: String(peers.length) }));
    const counts = Array.isArray(node.Counts) ? node.Counts : [];
    const tasks = ['UNKNOWN', ...STATES].map((s, i) => [s, counts[i] || 0]).filter(([, n]) => n > 0);
    const dl = el('dl', null,
      el('dt', { text: 'this peer leads' }), el('dd', { text: (node.Leading ?? '—') + ' partitions' }),
      el('dt', { text: 'replicas held' }), el('dd', { text: (node.Held ?? '—') + (node.Voter !== undefined ? ' (voter of ' + node.Voter + ')' : '') }),
      el('dt', { text: 'leaders known' }), el('dd', { text: (node.LeaderKnown ?? '—') + ' / ' + (node.Held ?? '—') }),
      el('dt', { text: 'tasks it owns' }), el('dd', null, tasks.length
        ? tasks.map(([s, n], i) => [i ? ' ' : '', el('span', { class: 's-' + s, title: s, text: n + ' ' + s.toLowerCase() })])
        : 'none'),
      el('dt', { text: 'steals' }), el('dd', { text:
        (stats.StealsAsked || 0) + ' asked · ' + (stats.StealsGranted || 0) + ' received · ' +
        (stats.TasksGranted || 0) + ' given · ' + (stats.LeaseExpiries || 0) + ' lease expiries' }));
    box.replaceChildren(pic, dl);
    box.hidden = false;
  }

  // ---- groups --------------------------------------------------------------

  function progress(data) {
    const counts = (data && data.counts) || {};
    const total = (data && data.total) || Object.values(counts).reduce((a, b) => a + b, 0);
    const done = (counts.SUCCEEDED || 0) + (counts.FAILED || 0) + (counts.CANCELED || 0);
    const label = BAR_ORDER.filter((s) => counts[s]).map((s) => counts[s] + ' ' + s.toLowerCase()).join(', ');
    return el('div', { class: 'bar-cell', title: label },
      bar(BAR_ORDER.map((s) => ['b-' + s, counts[s] || 0]), total, label || 'no tasks'),
      el('span', { class: 'n', text: done + ' / ' + total }));
  }

  function renderGroups() {
    const rows = st.tracked.map((id) => {
      const g = st.groups.get(id);
      return { id, open: id === st.openGroup, missing: !!(g && g.missing),
        d: g && g.data ? { mode: g.data.mode, state: g.data.state, counts: g.data.counts, total: g.data.total } : null };
    });
    $('#groups-empty').hidden = rows.length > 0;
    $('#groups').hidden = rows.length === 0;
    if (!changed('groups', JSON.stringify(rows))) return;
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.focusKey : null;
    replaceRows($('#groups tbody'), rows.map((r) => {
      const open = el('button', { type: 'button', class: 'open-group', 'data-focus-key': 'open:' + r.id,
        'aria-expanded': r.open ? 'true' : 'false', title: 'show the DAG of this group',
        onclick: (e) => { e.stopPropagation(); openGroup(r.open ? null : r.id); }, text: r.id });
      const rm = el('button', { type: 'button', class: 'icon', 'data-focus-key': 'rm:' + r.id,
        'aria-label': 'stop tracking ' + r.id, title: 'stop tracking',
        onclick: (e) => { e.stopPropagation(); untrack(r.id); }, text: '✕' });
      let state;
      if (r.missing) state = pill('missing', 'not found');
      else if (r.d) state = pill(r.d.state);
      else state = el('span', { class: 'muted', text: '…' });
      return el('tr', { class: 'clickable' + (r.open ? ' selected' : ''), onclick: () => openGroup(r.id) },
        el('th', { scope: 'row' }, open),
        el('td', { text: r.d ? r.d.mode : '' }),
        el('td', null, state),
        el('td', null, r.d ? progress(r.d) : null),
        el('td', { class: 'num' }, rm));
    }));
    if (focused) {
      const n = document.querySelector('[data-focus-key="' + CSS.escape(focused) + '"]');
      if (n) n.focus();
    }
  }

  function openGroup(id) {
    if (id) track(id);
    if (id && st.view !== 'overview') setView('overview');
    if (st.openGroup !== id) {
      st.openGroup = id;
      st.group = null;
      st.errors.group = null;
      sigs.delete('dag');
    }
    writeHash();
    renderGroups();
    renderGroup();
    if (id) kick();
  }

  // ---- DAG -----------------------------------------------------------------

  const NODE_W = 176;
  const NODE_H = 56;
  const GAP_X = 60;
  const GAP_Y = 12;
  const PAD = 14;
  const HEAD = 20;

  // layout places tasks in columns by depth (the longest path from a root)
  // and orders each column by the mean row of the task's deps, so that
  // chains run straight. Deps name task ids (or, tolerated, task names).
  function layout(tasks) {
    const n = tasks.length;
    const idx = new Map();
    tasks.forEach((t, i) => { idx.set(t.id, i); });
    tasks.forEach((t, i) => { if (t.name && !idx.has(t.name)) idx.set(t.name, i); });
    const deps = tasks.map((t) => (t.deps || []).map((d) => idx.get(d)).filter((j) => j !== undefined));
    const kids = tasks.map(() => []);
    const indeg = new Array(n).fill(0);
    deps.forEach((ds, i) => ds.forEach((j) => { kids[j].push(i); indeg[i]++; }));
    const depth = new Array(n).fill(0);
    const queue = [];
    for (let i = 0; i < n; i++) if (indeg[i] === 0) queue.push(i);
    for (let q = 0; q < queue.length; q++) {
      const i = queue[q];
      for (const k of kids[i]) {
        depth[k] = Math.max(depth[k], depth[i] + 1);
        if (--indeg[k] === 0) queue.push(k);
      }
    }
    const edges = deps.reduce((a, ds) => a + ds.length, 0);
    const pos = new Array(n);
    const cols = [];
    if (edges === 0 && n > 8) {
      // No deps (parallel, pipeline): a grid, not one tall column.
      const perCol = Math.max(6, Math.ceil(Math.sqrt(n * 1.5)));
      for (let i = 0; i < n; i++) {
        const c = Math.floor(i / perCol);
        (cols[c] = cols[c] || []).push(i);
        pos[i] = { col: c, row: i % perCol };
      }
      return { deps, pos, cols, layered: false };
    }
    for (let i = 0; i < n; i++) (cols[depth[i]] = cols[depth[i]] || []).push(i);
    cols.forEach((col, c) => {
      if (c > 0) {
        const key = (i) => deps[i].length ? deps[i].reduce((a, j) => a + pos[j].row, 0) / deps[i].length : Infinity;
        const keys = new Map(col.map((i) => [i, key(i)]));
        col.sort((a, b) => keys.get(a) - keys.get(b) || a - b);
      }
      col.forEach((i, r) => { pos[i] = { col: c, row: r }; });
    });
    return { deps, pos, cols, layered: true };
  }

  // renderGroupExtra shows what the task graph does not: a streaming
  // pipeline's progress per stage and its skipped items, the group's
  // webhook delivery, its key and its concurrency.
  function renderGroupExtra(g) {
    const box = $('#group-extra');
    const stages = g.stages || [];
    const skipped = g.skipped || [];
    if (!changed('group-extra', JSON.stringify([g.id, g.key, stages, g.items, skipped.length, g.notify, g.concurrency]))) return;
    const kids = [];
    if (stages.length > 0) {
      const items = g.items || 0;
      const rows = stages.map((s) => el('tr', null,
        el('th', { scope: 'row', text: s.name }),
        el('td', { class: 'num', text: s.concurrency > 0 ? String(s.concurrency) : 'unbounded' }),
        el('td', null, el('div', { class: 'bar-cell', title: s.done + ' of ' + items + ' items left this stage' },
          bar([['b-SUCCEEDED', s.done]], items, s.done + ' of ' + items + ' items'),
          el('span', { class: 'n', text: s.done + ' / ' + items }))),
      ));
      kids.push(el('table', { class: 'grid stages' },
        el('caption', { class: 'sr-only', text: 'pipeline stages' }),
        el('thead', null, el('tr', null,
          el('th', { scope: 'col', text: 'Stage' }), el('th', { scope: 'col', class: 'num', text: 'Concurrency' }),
          el('th', { scope: 'col', text: 'Items done' }))),
        el('tbody', null, ...rows)));
      if (skipped.length > 0) {
        const first = skipped.slice(0, 5).map((s) => 'item ' + s.item + ' at ' + s.stage + ': ' + s.reason).join('; ');
        kids.push(el('p', { class: 'skipped-note', text: skipped.length + ' item' + (skipped.length === 1 ? '' : 's') +
          ' skipped (failed a stage; later stages canceled) — ' + first + (skipped.length > 5 ? '; …' : '') }));
      }
    }
    const meta = [];
    if (g.key) meta.push(['key', g.key]);
    if (g.concurrency) meta.push(['concurrency', g.concurrency + ' at a time']);
    if (g.notify) {
      const n = g.notify;
      let v = n.url + ' — ' + n.state;
      if (n.attempts) v += ' (' + n.attempts + (n.attempts === 1 ? ' attempt)' : ' attempts)');
      if (n.last_error) v += ', last error: ' + n.last_error;
      if (n.next_attempt) v += ', next at ' + fmtClock(parseTime(n.next_attempt), false);
      meta.push(['webhook', v]);
    }
    if (meta.length > 0) {
      kids.push(el('dl', { class: 'fields group-fields' }, ...meta.map(([k, v]) => field(k, v, null, v))));
    }
    box.replaceChildren(...kids);
    box.hidden = kids.length === 0;
  }

  function renderGroup() {
    const sec = $('#group-section');
    const id = st.openGroup;
    sec.hidden = !id;
    if (!id) return;
    $('#group-title').textContent = id;
    const g = st.group;
    const dag = $('#dag');
    if (!g) {
      $('#group-meta').textContent = '';
      const e = st.errors.group;
      const msg = !e ? 'loading…' : e.status === 404 ? 'no group ' + id + ' in this mesh' : describe(e);
      if (changed('dag', 'loading:' + msg)) {
        dag.replaceChildren(el('p', { class: 'dag-note muted', text: msg }));
        $('#legend').replaceChildren();
      }
      return;
    }
    const tasks = g.tasks || [];
    const created = parseTime(g.created_at);
    const finished = parseTime(g.finished_at);
    $('#group-meta').replaceChildren(
      g.mode + ' · ', pill(g.state), ' · ' + (g.total ?? tasks.length) + ' tasks',
      created ? ' · created ' + fmtClock(created, false) : '',
      created ? ' · ' + (finished ? 'took ' : 'running for ') + fmtDur((finished || Date.now()) - created) : '');
    renderGroupExtra(g);
    const counts = g.counts || {};
    const sig = JSON.stringify([st.openTask, tasks.map((t) => [t.id, t.name, t.state, t.attempt, t.peer, t.deps])]);
    if (!changed('dag', sig)) return;
    $('#legend').replaceChildren(...STATES.map((s) => pill(s, s.toLowerCase() + (counts[s] ? ' ' + counts[s] : ''))));
    if (tasks.length === 0) {
      dag.replaceChildren(el('p', { class: 'dag-note muted', text: 'this group has no tasks' }));
      return;
    }
    const shown = tasks.slice(0, MAX_DAG);
    const L = layout(shown);
    const rows = Math.max(...L.cols.map((c) => c.length));
    const top = L.layered ? HEAD : 0;
    const W = PAD * 2 + L.cols.length * NODE_W + (L.cols.length - 1) * GAP_X;
    const H = PAD * 2 + top + rows * NODE_H + (rows - 1) * GAP_Y;
    const xy = (i) => ({
      x: PAD + L.pos[i].col * (NODE_W + GAP_X),
      y: PAD + top + L.pos[i].row * (NODE_H + GAP_Y),
    });
    const canvas = el('div', { class: 'dag-canvas' });
    canvas.style.width = W + 'px';
    canvas.style.height = H + 'px';
    const pic = svg('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'aria-hidden': 'true' },
      svg('defs', null,
        svg('marker', { id: 'arr', viewBox: '0 0 8 8', refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto' },
          svg('path', { class: 'arrow', d: 'M0,0 L8,4 L0,8 z' })),
        svg('marker', { id: 'arr-done', viewBox: '0 0 8 8', refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto' },
          svg('path', { class: 'arrow done', d: 'M0,0 L8,4 L0,8 z' }))));
    L.deps.forEach((ds, i) => {
      const b = xy(i);
      for (const j of ds) {
        const a = xy(j);
        const x1 = a.x + NODE_W;
        const y1 = a.y + NODE_H / 2;
        const x2 = b.x - 1;
        const y2 = b.y + NODE_H / 2;
        const dx = Math.max(24, (x2 - x1) / 2);
        const done = shown[j].state === 'SUCCEEDED';
        pic.append(svg('path', {
          class: 'edge' + (done ? ' done' : ''),
          d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`,
          'marker-end': done ? 'url(#arr-done)' : 'url(#arr)',
        }));
      }
    });
    canvas.append(pic);
    if (L.layered && L.cols.length > 1) {
      L.cols.forEach((_, c) => {
        const h = el('div', { class: 'colhead', text: 'depth ' + c });
        h.style.left = PAD + c * (NODE_W + GAP_X) + 'px';
        h.style.top = PAD - 4 + 'px';
        canvas.append(h);
      });
    }
    shown.forEach((t, i) => {
      const p = xy(i);
      const label = t.name || t.handler || t.id;
      const sub = [t.handler, t.attempt > 1 ? 'attempt ' + t.attempt : null, t.peer ? shortPeer(t.peer) : null]
        .filter(Boolean).join(' · ');
      const b = el('button', {
        type: 'button', class: 'node s-' + t.state + (t.id === st.openTask ? ' selected' : ''),
        'data-focus-key': 'task:' + t.id, 'aria-pressed': t.id === st.openTask ? 'true' : 'false',
        title: t.id + (t.error ? '\n' + t.error : ''),
        onclick: () => openTask(t.id === st.openTask ? null : t.id),
      },
      el('span', { class: 'name', text: label }),
      el('span', { class: 'sub', text: sub }),
      el('span', { class: 'st', text: t.state }));
      b.style.left = p.x + 'px';
      b.style.top = p.y + 'px';
      b.style.width = NODE_W + 'px';
      b.style.height = NODE_H + 'px';
      canvas.append(b);
    });
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.focusKey : null;
    const kids = [canvas];
    if (tasks.length > shown.length) {
      kids.push(el('p', { class: 'dag-note muted', text: 'showing the first ' + shown.length + ' of ' + tasks.length + ' tasks' }));
    }
    dag.replaceChildren(...kids);
    if (focused) {
      const n = dag.querySelector('[data-focus-key="' + CSS.escape(focused) + '"]');
      if (n) n.focus();
    }
  }

  // ---- task ----------------------------------------------------------------

  function openTask(id) {
    if (st.openTask !== id) {
      closeLogs();
      st.openTask = id;
      st.task = null;
      st.events = null;
      st.errors.task = null;
    }
    writeHash();
    sigs.delete('dag');
    renderGroup();
    renderTask();
    if (id) {
      kick();
      $('#task-section').scrollIntoView({ block: 'nearest', behavior: 'smooth' });
    }
  }

  function field(name, value, cls, title) {
    return el('div', null, el('dt', { text: name }), el('dd', { class: cls, title: title || null }, value));
  }

  // deathsText reads a task's worker_deaths: {shared, alone}.
  function deathsText(d) {
    const alone = d.alone || 0;
    const shared = d.shared || 0;
    return alone + ' alone · ' + shared + ' beside other tasks';
  }

  function renderTask() {
    const sec = $('#task-section');
    const id = st.openTask;
    sec.hidden = !id;
    if (!id) return;
    $('#task-title').textContent = id;
    renderLogs();
    const t = st.task;
    const tbody = $('#events tbody');
    if (!t) {
      const e = st.errors.task;
      $('#task-meta').textContent = !e ? 'loading…' : e.status === 404 ? 'no such task' : describe(e);
      $('#task-fields').replaceChildren();
      $('#task-actions').replaceChildren();
      replaceRows(tbody, []);
      renderLogs();
      return;
    }
    $('#task-meta').replaceChildren(t.name ? t.name + ' · ' : '', t.handler + ' · ', pill(t.state));
    renderTaskActions(t);
    const created = parseTime(t.created_at);
    const started = parseTime(t.started_at);
    const finished = parseTime(t.finished_at);
    const resultText = t.result === null || t.result === undefined ? '—' : json(t.result);
    $('#task-fields').replaceChildren(...[
      field('state', pill(t.state)),
      field('group', el('button', { type: 'button', class: 'open-group', text: t.group,
        onclick: () => openGroup(t.group) })),
      field('attempt · round', (t.attempt ?? 0) + ' · ' + (t.round ?? 0)),
      field('peer', shortPeer(t.peer) || '—', 'mono', t.peer),
      field('created', fmtClock(created)),
      field('started', fmtClock(started)),
      field('finished', fmtClock(finished)),
      field('run time', started ? fmtDur((finished || Date.now()) - started) + (finished ? '' : ' so far') : '—'),
      field('result', resultText, 'json', t.result === undefined ? null : json(t.result, 4000)),
      t.error ? field('error', t.error, 'err', t.error) : null,
      t.worker_deaths ? field('worker deaths', deathsText(t.worker_deaths), null,
        'external workers that died running it since its last outcome; two make it run alone, --worker-crash-limit lone ones fail it') : null,
      t.not_before ? field('not before', fmtClock(parseTime(t.not_before))) : null,
      t.waiting ? field('waiting', t.waiting, 'waiting', 'why this READY task runs nowhere yet: ' + t.waiting) : null,
      t.retries ? field('retries', String(t.retries), null,
        'times it was retried by hand; its state and result are of the runs since the last') : null,
      t.require && t.require.length ? field('requires', t.require.join(', '), 'mono', 'labels a peer or worker must carry to run it') : null,
      t.pin ? field('pinned to', shortPeer(t.pin), 'mono', t.pin) : null,
      t.stage !== undefined && t.stage !== null ? field(t.item !== undefined && t.item !== null ? 'stage · item' : 'stage',
        t.stage + (t.item !== undefined && t.item !== null ? ' · ' + t.item : '')) : null,
    ].filter(Boolean));
    const evs = st.events || [];
    const t0 = evs.length ? parseTime(evs[0].at) : null;
    replaceRows(tbody, evs.length ? evs.map((e) => {
      const at = parseTime(e.at);
      const detail = [e.error, e.by ? 'by ' + e.by : null].filter(Boolean).join(' · ');
      return el('tr', null,
        el('td', { class: 'num', text: e.seq }),
        el('td', null, el('span', { class: 'ev-type ev-' + e.type, text: e.type })),
        el('td', { class: 'mono', title: e.at || '' },
          fmtClock(at), t0 !== null && at !== null && at !== t0 ? el('span', { class: 'muted', text: ' +' + fmtDur(at - t0) }) : null),
        el('td', { class: 'num', text: e.round }),
        el('td', { class: 'mono', title: e.peer || '', text: shortPeer(e.peer) || '—' }),
        el('td', { class: e.error ? 'err' : 'muted', text: detail }));
    }) : [el('tr', null, el('td', { colspan: 6, class: 'muted', text: 'no events' }))]);
  }

  // ---- task actions --------------------------------------------------------

  // button makes an action button. A destructive one (confirm) asks for a
  // second click within 4 s instead of a modal prompt.
  function actionButton(label, opts, run) {
    const b = el('button', { type: 'button', class: 'act' + (opts.cls ? ' ' + opts.cls : ''),
      'data-focus-key': opts.key, title: opts.title || null, text: label });
    let armed = 0;
    b.addEventListener('click', async (e) => {
      e.stopPropagation();
      if (opts.confirm && !armed) {
        b.textContent = opts.confirm;
        b.classList.add('armed');
        armed = setTimeout(() => { armed = 0; b.textContent = label; b.classList.remove('armed'); }, 4000);
        return;
      }
      clearTimeout(armed);
      armed = 0;
      b.disabled = true;
      b.textContent = opts.busy || label + '…';
      try {
        const msg = await run();
        st.note = msg || null;
        b.textContent = opts.done || label;
        b.classList.remove('armed');
        b.classList.add('done');
      } catch (err) {
        st.note = null;
        b.textContent = label;
        b.disabled = false;
        b.classList.remove('armed');
        b.title = describe(err);
        flash(label.toLowerCase() + ' failed: ' + describe(err));
        return;
      }
      kick();
    });
    return b;
  }

  // flash shows an action's failure in the status line, over the refreshes
  // that follow, for FLASH_MS at least (until another replaces it).
  function flash(msg) {
    st.flash = msg;
    st.flashAt = Date.now();
    renderStatus();
  }

  function renderTaskActions(t) {
    const sig = t.id + ':' + t.state + ':' + t.attempt;
    if (!changed('task-actions', sig)) return;
    const enc2 = encodeURIComponent(t.id);
    const kids = [];
    if (!TERMINAL.has(t.state)) {
      kids.push(actionButton('Cancel', { key: 'cancel:' + t.id, cls: 'danger', confirm: 'Confirm cancel',
        title: 'cancel this task and the tasks that depend on it' }, async () => {
        const r = await act('POST', '/v1/tasks/' + enc2 + '/cancel');
        return 'canceled ' + t.id + ' (' + (r && r.state) + ')';
      }));
    }
    if (t.state === 'FAILED' || t.state === 'CANCELED') {
      kids.push(actionButton('Retry', { key: 'retry:' + t.id, cls: 'primary',
        title: 'run this task again (and its dependents canceled by its failure)' }, async () => {
        const r = await act('POST', '/v1/tasks/' + enc2 + '/retry');
        return 'retried ' + t.id + ' (' + (r && r.state) + ')';
      }));
    }
    $('#task-actions').replaceChildren(...kids);
  }

  // ---- task logs -----------------------------------------------------------
  // With "follow live" on, the log is read as Server-Sent Events from
  // GET /v1/tasks/{id}/logs?follow=true through fetch (an EventSource cannot
  // send the Authorization header); off, it is polled while the task runs.

  function closeLogs() {
    if (st.logs && st.logs.ctl) st.logs.ctl.abort();
    st.logs = null;
    sigs.delete('logs');
  }

  function logsURL(l, follow) {
    const q = new URLSearchParams();
    if (l.attempt) q.set('attempt', String(l.attempt));
    if (follow) q.set('follow', 'true');
    const s = q.toString();
    return '/v1/tasks/' + encodeURIComponent(l.task) + '/logs' + (s ? '?' + s : '');
  }

  async function refreshLogs(tid) {
    const rerun = st.logs && st.logs.terminal && st.task && st.task.id === tid && !TERMINAL.has(st.task.state);
    if (!st.logs || st.logs.task !== tid || rerun) {
      closeLogs();
      st.logs = { task: tid, attempt: 0, runs: [], lines: [], done: false, terminal: false, dropped: 0 };
    }
    const l = st.logs;
    if (st.follow) {
      if (!l.ctl && !(l.done && l.terminal)) follow(l);
      renderLogs();
      return;
    }
    if (l.fetched && l.done && l.terminal) return;
    try {
      const page = await api('GET', logsURL(l, false));
      if (st.logs !== l) return;
      Object.assign(l, { runs: page.runs || [], lines: page.lines || [], done: page.done, terminal: page.terminal,
        dropped: page.dropped_bytes || 0, unavailable: page.unavailable || '', shown: page.attempt, err: null, fetched: true });
    } catch (e) {
      if (st.logs !== l) return;
      l.err = e;
    }
    renderLogs();
  }

  async function follow(l) {
    const ctl = new AbortController();
    l.ctl = ctl;
    l.lines = [];
    l.err = null;
    l.following = true;
    const headers = { Accept: 'text/event-stream' };
    if (token()) headers.Authorization = 'Bearer ' + token();
    try {
      const res = await fetch(logsURL(l, true), { headers, signal: ctl.signal, cache: 'no-store', credentials: 'same-origin' });
      if (!res.ok) {
        let e = {};
        try { e = (await res.json()).error || {}; } catch (_) { /* not JSON */ }
        throw new ApiError(res.status, e.code || 'http_' + res.status, e.message || 'HTTP ' + res.status);
      }
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          sseEvent(l, buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
        if (st.logs === l) renderLogs();
      }
    } catch (e) {
      if (e.name === 'AbortError' || st.logs !== l) return;
      l.err = e instanceof ApiError ? e : new ApiError(0, 'network', 'log stream broke: ' + e.message);
      noteAuth(l.err);
    } finally {
      l.following = false;
      if (st.logs === l) {
        if (!(l.done && l.terminal)) l.ctl = null; // a broken stream is opened again on the next poll
        renderLogs();
      }
    }
  }

  function sseEvent(l, block) {
    let type = 'message';
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) type = line.slice(6).trim();
      else if (line.startsWith('data:')) data += line.slice(5).trim();
    }
    let v;
    try { v = JSON.parse(data); } catch (_) { return; }
    if (type === 'attempt') {
      Object.assign(l, { runs: v.runs || [], shown: v.attempt, lines: [], done: v.done, terminal: v.terminal,
        dropped: v.dropped_bytes || 0, unavailable: v.unavailable || '' });
      sigs.delete('logs');
    } else if (type === 'line') {
      l.lines.push(v);
      if (l.lines.length > MAX_LOG_LINES) l.lines.splice(0, l.lines.length - MAX_LOG_LINES);
    } else if (type === 'end') {
      l.done = true;
      l.terminal = true;
    }
  }

  function renderLogs() {
    const l = st.logs;
    const pre = $('#logs');
    const sel = $('#logs-attempt');
    if (!l) {
      pre.replaceChildren();
      sel.replaceChildren();
      $('#logs-meta').textContent = '';
      return;
    }
    const runs = l.runs || [];
    const runSig = JSON.stringify([l.attempt, runs.map((r) => r.attempt)]);
    if (changed('logs-runs', runSig)) {
      sel.replaceChildren(el('option', { value: '0', text: 'latest' }),
        ...runs.map((r) => el('option', { value: String(r.attempt), text: '#' + r.attempt + ' on ' + shortPeer(r.peer) })));
      sel.value = String(l.attempt || 0);
    }
    const state = l.err ? describe(l.err)
      : l.following ? (l.done && l.terminal ? 'complete' : 'following live…')
        : l.done && l.terminal ? 'complete' : l.shown ? 'attempt ' + l.shown + (l.done ? ' done' : ' running') : 'not run yet';
    $('#logs-meta').textContent = [l.lines.length + (l.lines.length === 1 ? ' line' : ' lines'), state,
      l.dropped ? l.dropped + ' bytes cut from the head' : '', l.unavailable || ''].filter(Boolean).join(' · ');
    const last = l.lines.length ? l.lines[l.lines.length - 1].seq : 0;
    if (!changed('logs', l.task + ':' + l.shown + ':' + l.lines.length + ':' + last)) return;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    if (!l.lines.length) {
      pre.replaceChildren(el('span', { class: 'muted', text: l.shown ? 'no lines logged' : 'no log yet' }));
      return;
    }
    pre.replaceChildren(...l.lines.map((ln) => el('div', { class: 'log-line', 'data-seq': ln.seq },
      el('span', { class: 'log-at', text: fmtClock(parseTime(ln.at)) }), ' ', ln.text)));
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  // ---- URL fragment --------------------------------------------------------
  // #track=<group id>[,<id>...] tracks groups and opens the first;
  // #group=<id>&task=<id> opens a group and a task (kept up to date);
  // #task=<id> shows one task with its logs; #groups, #failed, #schedules,
  // #audit, #workers show those views, with filters after a "?"
  // (#groups?state=FAILED&handler=resize&since=1h).

  function parseHash() {
    const h = location.hash.replace(/^#/, '');
    const m = /^([a-z]+)(?:\?(.*))?$/.exec(h);
    if (m && VIEWS.has(m[1])) return { view: m[1], params: new URLSearchParams(m[2] || '') };
    const params = new URLSearchParams(h);
    if (params.get('task') && !params.get('group') && !params.get('track')) return { view: 'task', params };
    return { view: 'overview', params };
  }

  function readHash() {
    const r = parseHash();
    setView(r.view);
    if (r.view !== 'overview') {
      // Other views show no group; the task view shows one task.
      const t = r.view === 'task' ? r.params.get('task') : null;
      if (st.openGroup) { st.openGroup = null; st.group = null; }
      if (st.openTask !== t) {
        closeLogs();
        st.openTask = t;
        st.task = null;
        st.events = null;
        st.errors.task = null;
      }
      renderGroup();
      renderTask();
      const v = views.get(r.view);
      if (v && v.enter) v.enter(r.params);
      return true;
    }
    const h = r.params;
    const tr = (h.get('track') || '').split(',').map((s) => s.trim()).filter(Boolean);
    tr.slice().reverse().forEach(track);
    const g = h.get('group') || tr[0] || null;
    const t = h.get('task');
    if (g) openGroup(g);
    else if (tr.length) renderGroups();
    if (t) openTask(t);
    return !!(g || t || tr.length);
  }

  function writeHash() {
    if (st.view !== 'overview' && st.view !== 'task') return;
    const h = new URLSearchParams();
    if (st.openGroup) h.set('group', st.openGroup);
    if (st.openTask) h.set('task', st.openTask);
    const s = h.toString();
    const url = location.pathname + location.search + (s ? '#' + s : '');
    if (url !== location.pathname + location.search + location.hash) {
      try { history.replaceState(null, '', url); } catch (_) { /* sandboxed */ }
    }
  }

  // ---- wiring --------------------------------------------------------------

  function init() {
    $('#token').value = token();
    $('#token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      setToken($('#token').value.trim());
      st.note = token() ? 'token set' : 'token cleared';
      kick();
    });
    $('#track-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const v = $('#track-id').value.trim();
      if (!v) return;
      $('#track-id').value = '';
      // A task id is "<group>.<n>": track its group and open the task.
      const m = /^(.+)\.(\d+)$/.exec(v);
      if (m) { openGroup(m[1]); openTask(v); } else openGroup(v);
    });
    $('#submit-example').addEventListener('click', async (e) => {
      const b = e.currentTarget;
      b.disabled = true;
      try {
        // As the other buttons: a 401 asks for the token and sends again;
        // a refusal stays in the status line (a 403 says which scope).
        const res = await act('POST', '/v1/groups', EXAMPLE);
        st.note = 'submitted ' + res.group;
        st.flash = null;
        openGroup(res.group);
      } catch (err) {
        flash('submit example failed: ' + describe(err));
      } finally {
        b.disabled = false;
      }
    });
    $('#pause').addEventListener('click', (e) => {
      st.paused = !st.paused;
      e.currentTarget.setAttribute('aria-pressed', String(st.paused));
      e.currentTarget.textContent = st.paused ? 'Resume' : 'Pause';
      if (st.paused) renderStatus(); else kick();
    });
    $('#group-close').addEventListener('click', () => { openTask(null); openGroup(null); });
    $('#task-close').addEventListener('click', () => openTask(null));
    document.addEventListener('visibilitychange', () => { if (!document.hidden) kick(); else renderStatus(); });
    window.addEventListener('hashchange', () => { readHash(); kick(); });
    $('#token-dialog-cancel').addEventListener('click', () => $('#token-dialog').close(''));
    $('#logs-follow').checked = st.follow;
    $('#logs-follow').addEventListener('change', (e) => {
      st.follow = e.currentTarget.checked;
      closeLogs();
      kick();
    });
    $('#logs-attempt').addEventListener('change', (e) => {
      const a = Number(e.currentTarget.value) || 0;
      const id = st.openTask;
      closeLogs();
      st.logs = { task: id, attempt: a, runs: [], lines: [], done: false, terminal: false, dropped: 0 };
      kick();
    });
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && !(e.target instanceof HTMLInputElement)) {
        if (st.openTask) openTask(null); else if (st.openGroup) openGroup(null);
      }
    });
    setInterval(() => { st.note = null; }, 6000);
    setInterval(() => {
      if (st.flash && Date.now() - st.flashAt >= FLASH_MS) { st.flash = null; renderStatus(); }
    }, 1000);
    readHash();
    renderGroups();
    kick();
  }

  // ---- views ---------------------------------------------------------------
  // views.js registers the other views: name -> {enter(params), refresh()}.
  // hooks run on every poll whatever the view (the throughput sampler).

  const views = new Map();
  const hooks = [];

  function setView(v) {
    if (!VIEWS.has(v)) v = 'overview';
    st.view = v;
    st.errors.view = null;
    $('#main').dataset.view = v;
    for (const sec of document.querySelectorAll('main > section[data-views]')) {
      sec.classList.toggle('off', !sec.dataset.views.split(' ').includes(v));
    }
    for (const a of document.querySelectorAll('#nav a')) {
      if (a.dataset.view === v || (v === 'task' && a.dataset.view === 'overview')) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  async function refreshView() {
    const v = views.get(st.view);
    if (!v || !v.refresh) return;
    try {
      await v.refresh();
      st.errors.view = null;
    } catch (e) {
      st.errors.view = e;
      noteAuth(e);
    }
  }

  window.NeedleDash = {
    st, api, act, describe, button: actionButton, el, svg, pill, bar, progress, changed, replaceRows, kick, shortPeer,
    parseTime, fmtClock, fmtDur, fmtAgo, json, STATES, BAR_ORDER, TERMINAL,
    register(name, v) {
      views.set(name, v);
      if (st.view === name && v.enter) { v.enter(parseHash().params); kick(); }
    },
    hook(fn) { hooks.push(fn); },
  };

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
