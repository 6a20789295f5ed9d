// pinbench view: the runs' numbers, every sample, and a sample's rollouts playing in sync.
// One page for the server (data from api/...) and the static bundle (data from data/*.js, opened from file://).
// Every text from the runs is put in the page as text (textContent), never as markup.
"use strict";
(function () {
  const MODE = document.documentElement.dataset.mode;
  const main = document.getElementById("main");
  const statusEl = document.getElementById("status");
  const STATUS = ["ok", "failed", "missing", "absent"];
  const PAGE = 100;
  let summary = null, table = null, player = null, positions = null, shownTable = false;
  const waiting = {}, chunks = {};

  // ------------------------------------------------------------------------------------------------ data
  window.pinbenchData = function (name, data) {
    const entry = waiting[name];
    if (entry) { delete waiting[name]; entry(data); }
  };
  function script(name) {
    return new Promise(function (resolve, reject) {
      waiting[name] = resolve;
      const tag = document.createElement("script");
      tag.src = "data/" + name + ".js";
      tag.onerror = function () { reject(new Error("cannot read data/" + name + ".js")); };
      document.head.appendChild(tag);
    });
  }
  function load(what, index, id) {
    if (MODE !== "bundle") {
      // a sample is asked by its index and its id: the server answers by the id, so a page loaded before the runs
      // changed never shows the sample that now sits at that index under another's row
      const url = what === "sample" ? "api/sample/" + index + "?id=" + encodeURIComponent(id) : "api/" + what;
      return fetch(url).then(function (r) {
        return r.ok ? r.json() : r.text().then(function (t) { throw new Error(url + ": " + r.status + " " + t); });
      });
    }
    if (what !== "sample") return script(what);
    const chunk = Math.floor(index / summary.chunk);
    chunks[chunk] = chunks[chunk] || script("samples-" + chunk);
    return chunks[chunk].then(function (d) { return d[String(index)]; });
  }
  function setStatus(state, text) { statusEl.dataset.state = state; statusEl.textContent = text; }

  // ------------------------------------------------------------------------------------------------ helpers
  function el(tag, attrs) {
    const e = document.createElement(tag);
    for (const key in attrs || {}) {
      const v = attrs[key];
      if (v === null || v === undefined || v === false) continue;
      if (key === "class") e.className = v;
      else if (key === "text") e.textContent = v;
      else if (key.slice(0, 2) === "on") e.addEventListener(key.slice(2), v);
      else e.setAttribute(key, v === true ? "" : v);
    }
    for (let i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function add(parent, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(parent, c); }); return; }
    parent.append(child instanceof Node ? child : String(child));
  }
  function svg(tag, attrs) {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const key in attrs || {}) if (attrs[key] !== null && attrs[key] !== undefined) e.setAttribute(key, attrs[key]);
    for (let i = 2; i < arguments.length; i++) if (arguments[i]) e.append(arguments[i]);
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "—";
    return Math.abs(v) >= 1e6 || (v !== 0 && Math.abs(v) < 1e-4) ? v.toExponential(4) : String(+v.toPrecision(6));
  }
  function badge(text, kind) { return el("span", {class: "badge b-" + (kind || text), text: text}); }
  function arrow(direction) { return direction === "higher" ? " ↑" : direction === "lower" ? " ↓" : ""; }
  function clamp(x, lo, hi) { return Math.min(hi, Math.max(lo, x)); }
  function route() {
    const hash = location.hash.replace(/^#/, "") || "/";
    const cut = hash.indexOf("?");
    const path = cut < 0 ? hash : hash.slice(0, cut);
    const params = new URLSearchParams(cut < 0 ? "" : hash.slice(cut + 1));
    if (path.indexOf("/sample/") === 0) return {page: "sample", id: decoded(path.slice(8)), params: params};
    return {page: "home", params: params};
  }
  function letter(i) {  // a run's name: A to Z, then AA, AB, ... (the 27th was "[", the character after Z)
    let name = "";
    for (let n = i + 1; n > 0; n = Math.floor((n - 1) / 26)) name = String.fromCharCode(65 + (n - 1) % 26) + name;
    return name;
  }
  function decoded(text) {  // a hand-edited address may hold a stray "%": the id as typed, not a URIError
    try { return decodeURIComponent(text); } catch (e) { return text; }
  }
  function link(path, params) { const q = params.toString(); return "#" + path + (q ? "?" + q : ""); }
  function sampleLink(id, params) { return link("/sample/" + encodeURIComponent(id), params); }
  function go(params) { location.hash = link("/", params); }

  // ------------------------------------------------------------------------------------------------ the order
  function selection(p) {
    const n = summary.columns.length;
    let column = summary.columns.findIndex(function (c) { return c.key === p.get("value"); });
    if (column < 0) column = n ? 0 : null;
    const runs = summary.runs.length;
    const sort = p.get("sort") || "order";
    const fallback = runs > 1 && (sort === "diff" || sort === "lost") ? 1 : 0;
    const run = clamp(parseInt(p.get("run") || String(fallback), 10) || 0, 0, runs - 1);
    return {column: column, run: run, sort: sort};
  }
  function order(p) {
    const s = selection(p), failedOnly = p.get("failed") === "1", q = (p.get("q") || "").toLowerCase();
    const filters = [];
    table.facets.forEach(function (f, i) { const v = p.get("f." + f.name); if (v) filters.push([i, f.levels.indexOf(v)]); });
    const out = [];
    for (let k = 0; k < table.ids.length; k++) {
      if (failedOnly && !table.status.some(function (st) { return st[k] === 1 || st[k] === 2; })) continue;
      if (q && table.ids[k].toLowerCase().indexOf(q) < 0) continue;
      if (filters.some(function (f) { return table.facets[f[0]].of[k] !== f[1]; })) continue;
      out.push(k);
    }
    if (s.sort === "id") return out.sort(function (a, b) { return table.ids[a] < table.ids[b] ? -1 : table.ids[a] > table.ids[b] ? 1 : 0; });
    if (s.column === null || s.sort === "order") return out;
    const direction = summary.columns[s.column].direction;
    const sign = direction === "lower" ? -1 : 1;
    const own = table.values[s.run][s.column], base = table.values[0][s.column];
    const key = new Float64Array(table.ids.length);
    const none = new Uint8Array(table.ids.length);
    out.forEach(function (k) {
      const v = own[k], a = base[k];
      const d = v === null || a === null ? null : v - a;
      const x = s.sort === "worst" ? (v === null ? null : sign * v)
        : s.sort === "best" ? (v === null ? null : -sign * v)
          : s.sort === "diff" ? (d === null ? null : -Math.abs(d))
            : s.sort === "lost" ? (d === null ? null : sign * d) : null;
      if (x === null) none[k] = 1; else key[k] = x;
    });
    return out.sort(function (a, b) {
      if (none[a] || none[b]) return none[a] - none[b] || a - b;
      return key[a] - key[b] || a - b;
    });
  }

  // ------------------------------------------------------------------------------------------------ home
  function runsTable() {
    function item(line) { return el("li", {text: line}); }
    return el("table", {id: "runs"},
      el("tr", null, ["run", "folder", "status", "reference", "samples", "recipe version"].map(function (h) { return el("th", {text: h}); })),
      summary.runs.map(function (r, i) {
        return el("tr", {"data-run": i},
          el("td", null, el("b", {text: letter(i) + " "}), r.label, r.ran_differently.length ? el("details", {class: "small ran-differently"},
            el("summary", {text: "ran differently (" + r.ran_differently.length + ")"}),
            el("ul", null, r.ran_differently.map(function (line) { return el("li", {text: line}); }))) : null),
          el("td", {class: "small", text: r.dir}),
          el("td", null, badge(r.status), r.status_reasons.length ? el("div", {class: "small", text: r.status_reasons.join("; ")}) : null),
          el("td", null, badge(r.verdict, r.verdict === "NO REFERENCE" ? "none" : r.verdict),
            r.problems.length ? el("ul", {class: "small warn verdict-why"}, r.problems.slice(0, 3).map(item),
              r.problems.length > 3 ? el("li", {class: "more"}, el("details", null, el("summary", {text: (r.problems.length - 3) + " more"}),
                el("ul", null, r.problems.slice(3).map(item)))) : null) : null,
            el("div", {class: "small muted", text: r.reference_note})),
          el("td", {class: "num", text: r.n_ok + " ok, " + r.n_failed + " failed, " + r.n_missing + " missing of " + r.n_expected}),
          el("td", {text: r.recipe_version}));
      }));
  }
  function metricsTable() {
    const head = el("tr", null, el("th", {text: "metric"}), summary.runs.map(function (r, i) {
      return el("th", {colspan: 3, text: letter(i) + " " + r.label});
    }));
    const sub = el("tr", null, el("th"), summary.runs.map(function () {
      return [el("th", {text: "value"}), el("th", {text: "95% interval"}), el("th", {text: "scored · verdict"})];
    }));
    const rows = summary.metrics.map(function (m) {
      return el("tr", {"data-metric": m.name}, el("td", null, el("code", {text: m.name}), (m.primary ? " ★" : "") + arrow(m.direction)),
        m.cells.map(function (c, i) {
          if (!c) return [el("td", {class: "muted", text: "not in run"}), el("td"), el("td")];
          return [el("td", {class: "num metric-value", "data-run": i, "data-value": c.value === null ? "null" : String(c.value), text: fmt(c.value)}),
            el("td", {class: "num", text: c.low === null ? "n/a" : "[" + fmt(c.low) + ", " + fmt(c.high) + "]"}),
            el("td", {class: "num"}, c.n_scored + "/" + c.n_expected + " ", c.status ? badge(c.status) : null,
              c.reference !== undefined ? el("span", {class: "small muted", text: " ref " + fmt(c.reference)}) : null)];
        }));
    });
    return el("div", {class: "metrics-wrap"}, el("table", {id: "metric-table"}, head, sub, rows));
  }
  function controls(p) {
    const s = selection(p), runs = summary.runs;
    function set(name, value) {
      const q = new URLSearchParams(p);
      if (value === "" || value === null) q.delete(name); else q.set(name, value);
      q.delete("page");
      go(q);
    }
    function select(id, name, options, current) {
      return el("select", {id: id, onchange: function () { set(name, this.value); }},
        options.map(function (o) { return el("option", {value: o[0], selected: o[0] === current, text: o[1]}); }));
    }
    const columnOptions = summary.columns.map(function (c) { return [c.key, c.key + (c.primary ? " ★" : "") + arrow(c.direction)]; });
    const sorts = [["order", "task order"], ["id", "sample id"], ["worst", "worst first"], ["best", "best first"]];
    if (runs.length > 1) sorts.push(["diff", "largest difference first"], ["lost", "most lost against A first"]);
    return el("div", {id: "controls"},
      columnOptions.length ? el("label", null, "value ", select("value", "value", columnOptions, s.column === null ? "" : summary.columns[s.column].key)) : null,
      el("label", null, "sort ", select("sort", "sort", sorts, s.sort)),
      runs.length > 1 ? el("label", null, "by run ", select("run", "run", runs.map(function (r, i) { return [String(i), letter(i) + " " + r.label]; }), String(s.run))) : null,
      el("label", null, el("input", {type: "checkbox", id: "failed", checked: p.get("failed") === "1",
        onchange: function () { set("failed", this.checked ? "1" : ""); }}), " failures only"),
      table.facets.map(function (f) {
        return el("label", null, f.name + " ", select("facet-" + f.name, "f." + f.name,
          [["", "all"]].concat(f.levels.map(function (l) { return [l, l]; })), p.get("f." + f.name) || ""));
      }),
      el("label", null, "id contains ", el("input", {type: "search", id: "q", value: p.get("q") || "",
        onchange: function () { set("q", this.value); }})));
  }
  function sampleTable(p) {
    const s = selection(p), ord = order(p), runs = summary.runs;
    const pages = Math.max(1, Math.ceil(ord.length / PAGE));
    const page = clamp(parseInt(p.get("page") || "0", 10) || 0, 0, pages - 1);
    const column = s.column === null ? null : summary.columns[s.column];
    const head = el("tr", null, el("th", {text: "#"}), el("th", {text: "sample"}),
      table.facets.map(function (f) { return el("th", {text: f.name}); }),
      runs.map(function (r, i) { return el("th", {text: letter(i) + (column ? " " + column.key : " status")}); }),
      runs.slice(1).map(function (r, i) { return el("th", {text: letter(i + 1) + " − A"}); }),
      el("th", {text: "failures"}));
    const rows = ord.slice(page * PAGE, (page + 1) * PAGE).map(function (k, n) {
      const why = [];
      const cells = runs.map(function (r, i) {
        const st = table.status[i][k], reason = table.errors[i][String(k)];
        if (reason) why.push(letter(i) + ": " + reason);
        const v = column ? table.values[i][s.column][k] : null;
        return el("td", {class: "num", "data-run": i, "data-value": v === null ? "null" : String(v)},
          v !== null ? fmt(v) : null, st !== 0 ? [" ", badge(STATUS[st])] : null);
      });
      const diffs = runs.slice(1).map(function (r, i) {
        const a = column ? table.values[0][s.column][k] : null, b = column ? table.values[i + 1][s.column][k] : null;
        if (a === null || b === null) return el("td", {class: "num", "data-diff": "null"});
        const d = b - a, good = column.direction && d !== 0 ? (d > 0) === (column.direction === "higher") : null;
        return el("td", {class: "num diff" + (good === null ? "" : good ? " better" : " worse"), "data-diff": String(d),
          text: (d > 0 ? "+" : "") + fmt(d)});
      });
      return el("tr", {"data-index": k, "data-id": table.ids[k]},
        el("td", {class: "num", text: String(page * PAGE + n + 1)}),
        el("td", {class: "id"}, el("a", {href: sampleLink(table.ids[k], p), text: table.ids[k]})),
        table.facets.map(function (f) { const l = f.of[k]; return el("td", {text: l < 0 ? "" : f.levels[l]}); }),
        cells, diffs, el("td", {class: "error", text: why.join("; ")}));
    });
    function pageLink(to, text) {
      const q = new URLSearchParams(p); q.set("page", String(to));
      return to < 0 || to >= pages || to === page ? el("span", {class: "muted", text: text}) : el("a", {href: link("/", q), text: text});
    }
    return [el("div", {id: "pager"}, pageLink(page - 1, "◀ previous"),
      el("span", {id: "page-info", text: ord.length ? "samples " + (page * PAGE + 1) + "–" + Math.min(ord.length, (page + 1) * PAGE) + " of " + ord.length + " (" + table.ids.length + " in all)" : "no sample matches"}),
      pageLink(page + 1, "next ▶")),
    el("table", {id: "sample-table"}, el("thead", null, head), el("tbody", null, rows))];
  }
  function showHome(p) {
    main.replaceChildren();
    add(main, [el("h2", {text: "Runs"}), runsTable(), el("h2", {text: "Metrics"}), metricsTable(),
      el("h2", {text: "Samples"}), controls(p), sampleTable(p),
      el("p", {class: "small muted", text: "Values are each sample's own, as the scorecard read them; B − A is the paired difference. Click a sample to watch its rollouts."})]);
    if (!shownTable) { shownTable = true; document.body.dataset.tableShownMs = String(Math.round(performance.now())); }
    setStatus("ready", summary.n_samples + " samples");
  }

  // ------------------------------------------------------------------------------------------------ the player
  function seekTo(video, t) {
    return new Promise(function (resolve) {
      if (video.readyState === 0 || Math.abs(video.currentTime - t) < 1e-6) { if (video.readyState) video.currentTime = t; resolve(); return; }
      const done = function () { video.removeEventListener("seeked", done); clearTimeout(timer); resolve(); };
      const timer = setTimeout(done, 5000);
      video.addEventListener("seeked", done);
      video.currentTime = t;
    });
  }
  function Player(entries, views) {
    // entries: [{video, offset (s), fps, frames}], the first the clock; views: what redraws with the clock
    this.entries = entries; this.master = entries[0]; this.views = views; this.playing = false;
    this.fps = this.master.fps; this.frames = this.master.frames;
  }
  Player.prototype.time = function () { return this.master.video.currentTime - this.master.offset; };
  Player.prototype.frame = function () { return clamp(Math.floor(this.time() * this.fps + 1e-6), 0, this.frames - 1); };
  Player.prototype.target = function (e, t) {
    const end = isFinite(e.video.duration) ? e.video.duration - 1e-3 : Infinity;
    return clamp(t + e.offset, 0, end);
  };
  Player.prototype.seek = function (t) {
    const self = this;
    t = clamp(t, 0, this.frames / this.fps);
    return Promise.all(this.entries.map(function (e) { return seekTo(e.video, self.target(e, t)); })).then(function () { self.draw(); });
  };
  Player.prototype.play = function () {
    const self = this;
    if (this.playing) return Promise.resolve();
    const t = this.frame() >= this.frames - 1 ? 0 : this.time();
    return this.seek(t).then(function () {
      self.entries.forEach(function (e) { e.video.playbackRate = 1; });
      return Promise.all(self.entries.map(function (e) { return e.video.play().catch(function () {}); }));
    }).then(function () { self.playing = true; self.draw(); requestAnimationFrame(function () { self.tick(); }); });
  };
  Player.prototype.pause = function () {
    this.playing = false;
    this.entries.forEach(function (e) { e.video.pause(); e.video.playbackRate = 1; });
    return this.seek(this.time());
  };
  Player.prototype.toggle = function () { return this.playing ? this.pause() : this.play(); };
  Player.prototype.step = function (n) {
    const self = this;
    return (this.playing ? this.pause() : Promise.resolve()).then(function () {
      return self.seek((clamp(self.frame() + n, 0, self.frames - 1) + 0.5) / self.fps);
    });
  };
  Player.prototype.tick = function () {
    const self = this;
    if (!this.playing) return;
    const t = this.time();
    this.entries.slice(1).forEach(function (e) {
      const want = self.target(e, t), drift = e.video.currentTime - want;
      if (e.video.ended || e.video.paused) return;
      if (Math.abs(drift) > 0.25) e.video.currentTime = want;
      else e.video.playbackRate = clamp(1 - 3 * drift, 0.8, 1.2);
    });
    this.draw();
    if (this.master.video.ended || this.master.video.paused) { this.pause(); return; }
    requestAnimationFrame(function () { self.tick(); });
  };
  Player.prototype.draw = function () {
    const t = this.time();
    this.views.forEach(function (v) { v(t); });
  };

  function videoFigure(m, entries) {
    const fig = el("figure", {class: "media"});
    add(fig, el("figcaption", {text: m.label + (m.offset_frames ? " (from its frame " + m.offset_frames + ")" : "")}));
    if (!m.url) { add(fig, el("div", {class: "warn", text: m.problem || "not available"})); return fig; }
    if (m.kind === "image") { add(fig, el("img", {class: "input", src: m.url, alt: m.label})); return fig; }
    const video = el("video", {src: m.url, muted: true, playsinline: true, preload: "auto", disablepictureinpicture: true,
      "data-role": m.role, "data-run": m.run, "data-fps": m.fps, "data-frames": m.n_frames, "data-sha256": m.sha256});
    video.muted = true;
    add(fig, video);
    entries.push({video: video, offset: (m.offset_frames || 0) / m.fps, fps: m.fps, frames: m.n_frames, meta: m});
    const note = [m.width + "×" + m.height + ", " + m.n_frames + " frames at " + fmt(m.fps) + " fps, " + m.codec];
    if (m.preview) note.push("web preview (" + m.preview + ")");
    add(fig, el("figcaption", {text: note.join("; ")}));
    if (m.mismatch) add(fig, el("div", {class: "warn", text: m.mismatch}));
    if (m.offset_frames) {
      const frames = m.n_frames, box = svg("svg", {class: "timeline context", height: 24});
      box.append(svg("rect", {class: "span alt", x: 0, y: 2, width: pct(m.offset_frames, frames), height: 20}),
        svg("text", {x: 4, y: 16}, document.createTextNode("context: frames 0–" + (m.offset_frames - 1) + " · the rollout continues from " + m.offset_frames)),
        svg("line", {class: "marker", x1: pct(m.offset_frames, frames), x2: pct(m.offset_frames, frames), y1: 0, y2: 24}));
      cursorOf(box, 24, m.fps, frames);
      const draw = box.draw;
      add(fig, box);
      fig.draw = function (t) { draw(t + m.offset_frames / m.fps); };
    }
    return fig;
  }
  // Timelines are drawn in percent of their width (text keeps its shape at any width); series in a stretched
  // inner box, their strokes unscaled.
  function pct(f, frames) { return (100 * clamp(f, 0, frames) / frames) + "%"; }
  function cursorOf(box, height, fps, frames) {
    const cursor = svg("line", {class: "cursor", y1: 0, y2: height});
    box.append(cursor);
    box.draw = function (t) { const x = pct(t * fps, frames); cursor.setAttribute("x1", x); cursor.setAttribute("x2", x); };
  }
  function timeline(run, fps, frames) {
    const box = svg("svg", {class: "timeline", height: 44, "data-run": run.index});
    (run.spans || []).forEach(function (s, i) {
      const rect = svg("rect", {class: "span" + (i % 2 ? " alt" : ""), x: pct(s.start, frames), y: 0,
        width: (100 * Math.max(1, s.stop - s.start) / frames) + "%", height: 20});
      rect.append(svg("title", null, document.createTextNode(s.label)));
      box.append(rect);
      const label = svg("text", {x: pct(s.start, frames), dx: 3, y: 14}, document.createTextNode(s.label.slice(0, 48)));
      label.append(svg("title", null, document.createTextNode(s.label)));
      box.append(label);
    });
    (run.markers || []).forEach(function (m) {
      box.append(svg("line", {class: "marker", x1: pct(m.frame, frames), x2: pct(m.frame, frames), y1: 20, y2: 44}),
        svg("text", {x: pct(m.frame, frames), dx: m.frame > frames * 0.8 ? -4 : 4, y: 38,
          "text-anchor": m.frame > frames * 0.8 ? "end" : "start"}, document.createTextNode(m.label + " " + m.frame)));
    });
    cursorOf(box, 44, fps, frames);
    return box;
  }
  function seriesChart(series, fps, frames) {
    const box = svg("svg", {class: "series", height: 130});
    const plot = svg("svg", {viewBox: "0 0 1000 130", preserveAspectRatio: "none", width: "100%", height: 130});
    let top = 0;
    series.forEach(function (s) { s.values.forEach(function (v) { top = Math.max(top, v); }); if (s.threshold !== null) top = Math.max(top, s.threshold); });
    const peak = top;
    top = top > 0 ? top * 1.1 : 1;
    const x = function (f) { return 1000 * f / frames; }, y = function (v) { return 125 - 105 * v / top; };
    series.forEach(function (s, i) {
      const on = s.threshold !== null && s.values.some(function (v) { return v > s.threshold; });
      const line = svg("polyline", {class: "line" + (on ? " on" : ""), "vector-effect": "non-scaling-stroke",
        points: s.frames.map(function (f, j) { return x(f) + "," + y(s.values[j]); }).join(" ")});
      line.append(svg("title", null, document.createTextNode(s.label)));
      plot.append(line);
      if (s.threshold !== null && i === 0) {
        plot.append(svg("line", {class: "threshold", "vector-effect": "non-scaling-stroke", x1: 0, x2: 1000, y1: y(s.threshold), y2: y(s.threshold)}));
        box.append(svg("text", {x: "100%", dx: -4, y: y(s.threshold) - 3, "text-anchor": "end"},
          document.createTextNode(s.threshold_label + " = " + fmt(s.threshold))));
      }
    });
    box.append(plot, svg("text", {x: 4, y: 12}, document.createTextNode(series.length + " series: " +
      series.map(function (s) { return s.label; }).join(", ").slice(0, 90) + "; max " + fmt(peak))));
    cursorOf(box, 130, fps, frames);
    return box;
  }
  function sampleMetrics(data) {
    const names = [];
    data.runs.forEach(function (r) { r.metrics.forEach(function (m) { if (names.indexOf(m.name) < 0) names.push(m.name); }); });
    const runs = summary.runs;
    const head = el("tr", null, el("th", {text: "metric"}), runs.map(function (r, i) { return el("th", {text: letter(i) + " " + r.label}); }),
      runs.slice(1).map(function (r, i) { return el("th", {text: letter(i + 1) + " − A"}); }));
    const rows = names.map(function (name) {
      const found = data.runs.map(function (r) { return r.metrics.find(function (m) { return m.name === name; }); });
      return el("tr", {"data-metric": name}, el("td", null, el("code", {text: name})),
        found.map(function (m, i) {
          if (!m) return el("td", {class: "muted", "data-run": i, "data-value": "absent", text: "—"});
          if (m.value === null) return el("td", {class: "error", "data-run": i, "data-value": "null", text: m.reason});
          return el("td", {class: "num", "data-run": i, "data-value": String(m.value), text: fmt(m.value)});
        }),
        found.slice(1).map(function (m) {
          const a = found[0];
          return el("td", {class: "num", text: m && a && m.value !== null && a.value !== null ? fmt(m.value - a.value) : ""});
        }));
    });
    return el("table", {id: "sample-metrics"}, head, rows);
  }
  function showSample(r) {
    const index = positions.get(r.id);
    if (index === undefined) { main.replaceChildren(el("p", {class: "warn", text: "no sample " + r.id + " in these runs"})); setStatus("ready", "no such sample"); return; }
    setStatus("loading", "loading " + r.id + "…");
    return load("sample", index, r.id).then(function (data) {
      if (data.id !== r.id) throw new Error("asked for sample " + r.id + ", got " + data.id + ": reload the page");
      const ord = order(r.params), at = ord.indexOf(index);
      const nav = el("p", null, el("a", {href: link("/", r.params), text: "◀ all samples"}), " · ",
        at > 0 ? el("a", {id: "prev", href: sampleLink(table.ids[ord[at - 1]], r.params), text: "previous"}) : "previous", " · ",
        at >= 0 && at < ord.length - 1 ? el("a", {id: "next", href: sampleLink(table.ids[ord[at + 1]], r.params), text: "next"}) : "next",
        at >= 0 ? " (" + (at + 1) + " of " + ord.length + " in this order)" : "");
      const entries = [], views = [];
      const columns = data.runs.map(function (run, i) {
        run.index = i;
        const box = el("div", {class: "column", "data-run": i},
          el("h3", null, letter(i) + " " + summary.runs[i].label + " ", badge(run.status)));
        if (run.error) add(box, el("div", {class: "warn", text: run.error}));
        (run.problems || []).forEach(function (p) { add(box, el("div", {class: "warn", text: p})); });
        const first = entries.length;
        (run.rollouts || []).forEach(function (m) { m.role = "rollout"; add(box, videoFigure(m, entries)); });
        const own = entries[first];
        const fps = own ? own.fps : null, frames = own ? own.frames : null;
        if (fps && ((run.spans || []).length || (run.markers || []).length)) {
          const line = timeline(run, fps, frames); add(box, line); views.push(line.draw);
          add(box, el("div", {class: "markers"}, (run.markers || []).map(function (m) {
            return el("button", {type: "button", class: "marker", "data-frame": m.frame, text: m.label + " " + m.frame,
              onclick: function () { this.blur(); if (player) player.pause().then(function () { return player.seek((m.frame + 0.5) / fps); }); }});
          })));
        }
        if (fps && (run.series || []).length) { const chart = seriesChart(run.series, fps, frames); add(box, chart); views.push(chart.draw); }
        return box;
      });
      const inputs = el("div", {class: "column", id: "inputs"}, el("h3", {text: "Task inputs"}));
      const texts = data.inputs.filter(function (m) { return m.kind === "text"; });
      data.inputs.filter(function (m) { return m.kind !== "text"; }).forEach(function (m) {
        m.role = "input"; const fig = videoFigure(m, entries); add(inputs, fig); if (fig.draw) views.push(fig.draw);
      });
      if (texts.length) add(inputs, el("ol", {class: "texts"}, texts.map(function (t) { return el("li", null, el("b", {text: t.label + ": "}), t.text); })));
      const derived = [];
      data.runs.forEach(function (run, i) {
        run.derived.forEach(function (d) {
          derived.push(el("li", null, letter(i) + ": ", el("code", {text: d.id}), " (" + d.n_members + " samples): ",
            Object.keys(d.metrics).map(function (k) { return k + " " + fmt(d.metrics[k]); }).join(", ")));
        });
      });
      const frameNumber = el("span", {id: "frame-number", text: "0"}), clock = el("span", {id: "time", class: "muted"});
      const scrub = el("input", {type: "range", id: "scrub", min: 0, max: 0, step: 1, value: 0});
      const play = el("button", {type: "button", id: "play", text: "▶ play"});
      const bar = el("div", {id: "player"}, play,
        el("button", {type: "button", id: "back", text: "◀ frame"}), el("button", {type: "button", id: "forward", text: "frame ▶"}),
        scrub, el("span", null, "frame ", frameNumber), clock,
        el("span", {class: "small muted", text: "space: play/pause · ← →: a frame · shift: ten"}));
      main.replaceChildren();
      add(main, [nav, el("h2", null, el("code", {text: data.id})), bar,
        el("div", {class: "grid"}, columns, inputs.childNodes.length > 1 ? inputs : null),
        el("h2", {text: "Every metric of this sample"}), sampleMetrics(data),
        derived.length ? [el("h2", {text: "Computed over many samples, this one among them"}), el("ul", null, derived)] : null,
        el("h2", {text: "Records"}), data.runs.map(function (run, i) {
          return el("details", null, el("summary", {text: letter(i) + " " + summary.runs[i].label}),
            el("pre", {class: "record", text: JSON.stringify(run.record, null, 1)}));
        })]);
      const playable = entries.filter(function (e) { return e.fps && e.frames; });
      if (!playable.length) { bar.remove(); player = null; setStatus("ready", "no video"); return; }
      player = new Player(playable, views);
      scrub.max = String(player.frames - 1);
      views.push(function (t) {
        const f = clamp(Math.floor(t * player.fps + 1e-6), 0, player.frames - 1);
        frameNumber.textContent = String(f); scrub.value = String(f);
        clock.textContent = t.toFixed(3) + " s";
        play.textContent = player.playing ? "❚❚ pause" : "▶ play";
      });
      play.addEventListener("click", function () { this.blur(); player.toggle(); });
      bar.querySelector("#back").addEventListener("click", function () { this.blur(); player.step(-1); });
      bar.querySelector("#forward").addEventListener("click", function () { this.blur(); player.step(1); });
      scrub.addEventListener("input", function () { player.seek((parseInt(scrub.value, 10) + 0.5) / player.fps); });
      let pending = playable.length;
      const ready = function () { if (--pending === 0) { player.seek(0.5 / player.fps).then(function () { setStatus("ready", data.id); }); } };
      playable.forEach(function (e) {
        if (e.video.readyState >= 2) ready();
        else {
          let once = false;
          const done = function () { if (!once) { once = true; ready(); } };
          e.video.addEventListener("loadeddata", done); e.video.addEventListener("error", done);
        }
      });
    });
  }

  document.addEventListener("keydown", function (e) {
    if (!player || !document.getElementById("player")) return;
    const t = e.target;
    if (t && ((t.tagName === "INPUT" && t.type !== "range") || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    const n = e.shiftKey ? 10 : 1;
    if (e.key === "ArrowRight") { e.preventDefault(); player.step(n); }
    else if (e.key === "ArrowLeft") { e.preventDefault(); player.step(-n); }
    else if (e.key === " " || e.key === "k") { e.preventDefault(); player.toggle(); }
  });

  function show() {
    const r = route();
    if (player) { player.entries.forEach(function (e) { e.video.pause(); }); player = null; }
    const done = r.page === "sample" ? showSample(r) : showHome(r.params);
    Promise.resolve(done).catch(function (err) { setStatus("error", String(err.message || err)); });
  }
  Promise.all([load("summary"), load("table")]).then(function (got) {
    summary = got[0]; table = got[1];
    positions = new Map(table.ids.map(function (id, i) { return [id, i]; }));
    document.getElementById("title").textContent = summary.recipe + ": " + summary.runs.map(function (r, i) { return letter(i) + " " + r.label; }).join(" · ");
    window.addEventListener("hashchange", show);
    show();
  }).catch(function (err) { setStatus("error", String(err.message || err)); });
})();
