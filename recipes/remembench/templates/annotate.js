// The RememBench annotation page: scrub each rollout, mark its departure and revisit frames.
// Every mark is POSTed at once; the server writes it to disk before it answers. Text from the dataset
// (scene ids, prompts) is only ever set as textContent, never parsed as HTML.
"use strict";

const state = {session: null, index: -1, frame: 0, native: false, pending: 0, positionTimer: null, scrubbing: false};
const $ = (id) => document.getElementById(id);

function scene() { return state.session.scenes[state.index]; }
function imageUrl(s, kind, frame) { return `api/scenes/${encodeURIComponent(s.scene_id)}/${kind}/${frame}`; }
function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function showPending() {
  $("status").dataset.pending = String(state.pending + (state.positionTimer === null ? 0 : 1));
}
function setStatus(kind, text) {
  const status = $("status");
  status.dataset.state = kind;
  status.textContent = text;
  showPending();
}

async function post(path, body) {
  state.pending += 1;
  setStatus("saving", "saving\u2026");
  try {
    const response = await fetch(`api/${path}`, {method: "POST", headers: {"content-type": "application/json"},
                                                 body: JSON.stringify(body)});
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    state.pending -= 1;
    setStatus("saved", `saved ${new Date().toLocaleTimeString()}`);
    return data;
  } catch (error) {
    state.pending -= 1;
    setStatus("error", `not saved: ${error.message}`);
    throw error;
  }
}

function sceneClass(s) {
  if (!s.video) return "novideo";
  return {"complete": "complete", "not annotated": "", "revisit before departure": "invalid"}[s.state] ?? "partial";
}

function renderList() {
  const list = $("scene-list");
  list.replaceChildren();
  state.session.scenes.forEach((s, i) => {
    const item = element("li", undefined, sceneClass(s));
    if (i === state.index) item.classList.add("current");
    const button = element("button", s.scene_id);
    button.type = "button";
    button.dataset.scene = s.scene_id;
    button.disabled = !s.video;
    button.title = s.video ? s.state : s.problem;
    button.addEventListener("click", () => { showScene(i, 0); button.blur(); });
    item.append(button);
    list.append(item);
  });
  const missing = state.session.scenes.filter((s) => !s.video);
  $("missing-count").textContent = `(${missing.length})`;
  $("missing-list").replaceChildren(...missing.map((s) => element("li", `${s.scene_id}: ${s.problem}`)));
  const unmatched = state.session.unmatched_videos;
  $("unmatched-title").hidden = unmatched.length === 0;
  $("unmatched-list").replaceChildren(...unmatched.map((name) => element("li", name)));
  const counts = state.session.counts;
  $("counts").textContent = `${counts.complete || 0} of ${state.session.scenes.length} complete`;
}

function describeMark(mark) {
  if (!mark) return "";
  if (mark.source === "dataset") return "prefilled from the dataset (paper backbone); press its key to replace it";
  return `by ${mark.by}, ${mark.at}`;
}

function renderMarks() {
  const s = scene();
  for (const name of ["departure", "revisit"]) {
    const mark = s[name];
    $(`${name}-frame`).textContent = mark ? String(mark.frame) : "\u2013";
    const source = $(`${name}-source`);
    source.textContent = describeMark(mark);
    source.className = mark && mark.source === "dataset" ? "source-dataset" : "";
    source.dataset.source = mark ? mark.source : "";
    document.querySelectorAll(`.thumb.${name}`).forEach((node) => node.classList.remove(name));
    document.querySelectorAll(`#timeline .mark.${name}`).forEach((node) => node.remove());
    if (mark) {
      const thumb = document.querySelector(`.thumb[data-frame="${mark.frame}"]`);
      if (thumb) thumb.classList.add(name);
      const line = element("div", undefined, `mark ${name}`);
      line.style.left = `${(100 * mark.frame) / Math.max(1, s.n_frames - 1)}%`;
      $("timeline").append(line);
    }
  }
  $("scene-state").textContent = `this scene: ${s.state}` +
    (s.state === "revisit before departure" ? " (not written until the departure comes first)" : "");
}

function renderNotice(s) {
  const lines = [s.problem, s.warning, s.prefill_note].filter(Boolean);
  $("notice").hidden = lines.length === 0;
  $("notice").textContent = lines.join("\n");
}

function buildStrip(s) {
  const strip = $("strip");
  strip.replaceChildren();
  const starts = new Map(s.starts.map((start, i) => [start.frame, `${i + 1}: ${start.seconds} s`]));
  for (let frame = 0; frame < s.n_frames; frame += 1) {
    const thumb = element("div", undefined, "thumb");
    thumb.dataset.frame = String(frame);
    const img = element("img");
    img.loading = "lazy";
    img.draggable = false;
    img.alt = `frame ${frame}`;
    img.src = imageUrl(s, "thumb", frame);
    thumb.append(img, element("span", String(frame), "number"));
    if (starts.has(frame)) thumb.append(element("span", starts.get(frame), "segment"));
    strip.append(thumb);
  }
}

function buildTimeline(s) {
  const timeline = $("timeline");
  timeline.replaceChildren($("cursor"));
  s.starts.forEach((start, i) => {
    const tick = element("div", undefined, "tick");
    tick.style.left = `${(100 * start.frame) / Math.max(1, s.n_frames - 1)}%`;
    tick.append(element("span", `${i + 1}`));
    tick.title = `segment ${i + 1} from ${start.seconds} s (frame ${start.frame}): ${start.prompt}`;
    timeline.append(tick);
  });
}

function buildPrompts(s) {
  $("prompts").replaceChildren(...s.starts.map((start) => {
    const item = element("li");
    const link = element("button", `${start.seconds} s, frame ${start.frame}`);
    link.type = "button";
    link.addEventListener("click", () => { setFrame(start.frame); link.blur(); });
    item.append(link, document.createTextNode(` ${start.prompt}`));
    return item;
  }));
}

function showScene(index, frame) {
  state.index = index;
  const s = scene();
  $("scene-id").textContent = s.scene_id;
  $("scene-position").textContent = `(${index + 1} of ${state.session.scenes.length})`;
  renderNotice(s);
  renderList();
  if (!s.video) return;
  $("frame-last").textContent = String(s.n_frames - 1);
  $("native-size").textContent = `${s.width}\u00d7${s.height}`;
  buildStrip(s);
  buildTimeline(s);
  buildPrompts(s);
  renderMarks();
  const next = state.session.scenes.slice(index + 1).find((other) => other.video);
  $("preview").onload = () => {  // warm the next scene's frames while this one is annotated
    $("preview").onload = null;
    if (next) new Image().src = imageUrl(next, "thumb", 0);
  };
  setFrame(Math.min(frame, s.n_frames - 1));
}

function setFrame(frame, save = true) {
  const s = scene();
  if (!s.video) return;
  frame = Math.max(0, Math.min(s.n_frames - 1, frame));
  state.frame = frame;
  $("preview").src = imageUrl(s, "preview", frame);
  if (state.native) $("native").src = imageUrl(s, "native", frame);
  $("frame-number").textContent = String(frame);
  $("frame-time").textContent = `${(frame / s.fps).toFixed(3)} s`;
  let segment = 0;
  s.starts.forEach((start, i) => { if (start.frame <= frame) segment = i; });
  $("segment").textContent = `${segment + 1} of ${s.starts.length}`;
  document.querySelectorAll("#prompts li").forEach((li, i) => li.classList.toggle("current", i === segment));
  document.querySelectorAll(".thumb.current").forEach((node) => node.classList.remove("current"));
  const thumb = document.querySelector(`.thumb[data-frame="${frame}"]`);
  if (thumb) {
    thumb.classList.add("current");
    if (!state.scrubbing) thumb.scrollIntoView({block: "nearest", inline: "center"});
  }
  $("cursor").style.left = `${(100 * frame) / Math.max(1, s.n_frames - 1)}%`;
  if (save) schedulePosition();
}

function schedulePosition() {
  if (state.positionTimer !== null) clearTimeout(state.positionTimer);
  state.positionTimer = setTimeout(() => {
    state.positionTimer = null;
    post("position", {scene_id: scene().scene_id, frame: state.frame}).catch(() => {});
  }, 250);
  showPending();
}

async function mark(name) {
  const s = scene();
  if (!s.video) return;
  const data = await post(`scenes/${encodeURIComponent(s.scene_id)}/marks`, {mark: name, frame: state.frame});
  state.session.scenes[state.index] = data.scene;
  state.session.counts = data.counts;
  renderMarks();
  renderList();
}

function moveScene(step) {
  const scenes = state.session.scenes;
  for (let i = state.index + step; i >= 0 && i < scenes.length; i += step) {
    if (scenes[i].video) { showScene(i, 0); return; }
  }
  setStatus($("status").dataset.state, step > 0 ? "this is the last scene with a video" : "this is the first scene");
}

function toggleNative() {
  state.native = !state.native;
  $("native-box").hidden = !state.native;
  if (state.native) $("native").src = imageUrl(scene(), "native", state.frame);
}

function goTo(name) {
  const mark = scene()[name];
  if (mark) setFrame(mark.frame);
}

function frameAt(event) {
  const thumb = event.target.closest(".thumb");
  return thumb ? Number(thumb.dataset.frame) : null;
}

function wire() {
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || !state.session || state.index < 0) return;
    const step = event.shiftKey ? 10 : 1;
    switch (event.key) {
      case "ArrowLeft": setFrame(state.frame - step); break;
      case "ArrowRight": setFrame(state.frame + step); break;
      case "d": case "D": mark("departure").catch(() => {}); break;
      case "r": case "R": mark("revisit").catch(() => {}); break;
      case "Enter": moveScene(event.shiftKey ? -1 : 1); break;
      case "n": case "N": toggleNative(); break;
      default: return;
    }
    event.preventDefault();
  });
  const strip = $("strip");
  strip.addEventListener("pointerdown", (event) => {
    const frame = frameAt(event);
    if (frame === null) return;
    state.scrubbing = true;
    setFrame(frame);
  });
  strip.addEventListener("pointermove", (event) => {
    if (!state.scrubbing || !(event.buttons & 1)) return;
    const frame = frameAt(event);
    if (frame !== null && frame !== state.frame) setFrame(frame);
  });
  const timeline = $("timeline");
  const fromTimeline = (event) => {
    const box = timeline.getBoundingClientRect();
    const ratio = Math.max(0, Math.min(1, (event.clientX - box.left) / box.width));
    setFrame(Math.round(ratio * (scene().n_frames - 1)));
  };
  timeline.addEventListener("pointerdown", (event) => {
    state.scrubbing = true;
    timeline.setPointerCapture(event.pointerId);
    fromTimeline(event);
  });
  timeline.addEventListener("pointermove", (event) => { if (state.scrubbing && (event.buttons & 1)) fromTimeline(event); });
  document.addEventListener("pointerup", () => { state.scrubbing = false; });
  const click = (id, action) => $(id).addEventListener("click", (event) => { action(); event.currentTarget.blur(); });
  click("mark-departure", () => mark("departure").catch(() => {}));
  click("mark-revisit", () => mark("revisit").catch(() => {}));
  click("go-departure", () => goTo("departure"));
  click("go-revisit", () => goTo("revisit"));
  click("toggle-native", toggleNative);
  click("next-scene", () => moveScene(1));
  click("prev-scene", () => moveScene(-1));
  $("preview").addEventListener("error", async () => {
    const response = await fetch($("preview").src);
    if (!response.ok) {
      const data = await response.json().catch(() => ({error: response.statusText}));
      $("notice").hidden = false;
      $("notice").textContent = `this rollout cannot be shown: ${data.error}`;
    }
  });
}

async function start() {
  wire();
  const response = await fetch("api/session");
  state.session = await response.json();
  $("annotator").textContent = state.session.annotator;
  $("out-file").textContent = state.session.out;
  $("sidecar-file").textContent = state.session.sidecar;
  const scenes = state.session.scenes;
  const position = state.session.position;
  let index = position ? scenes.findIndex((s) => s.scene_id === position.scene_id && s.video) : -1;
  let frame = index >= 0 ? position.frame : 0;
  if (index < 0) { index = scenes.findIndex((s) => s.video); frame = 0; }
  if (index < 0) {
    renderList();
    setStatus("empty", "no scene has a video to annotate");
    return;
  }
  showScene(index, frame);
  if (state.positionTimer !== null) { clearTimeout(state.positionTimer); state.positionTimer = null; }
  setStatus("ready", "ready");
}

start().catch((error) => setStatus("error", `could not load the session: ${error.message}`));
