/* The drag explorer of chapter 2 (attnlib.explorers.token_drag exports its data).
 *
 * The reader drags a key k_it or the start p(0) in the 2-D token plane; the page recomputes,
 * in the browser, for the prompt model of chapters 1-3:
 *   - the softmax attention s_i = softmax(K_i p) and g_i = sum_t s_it gamma_it,
 *   - p^mm(alpha) = argmin ||p|| s.t. (k_{i alpha_i} - k_it)^T p >= 1 (attSvm2d: exact in 2-D)
 *     for the token alpha_i the reader selects in each input (one menu per input), its support
 *     tokens (the active constraints), each input's two margin lines (the levels
 *     k^T p^mm = k_{i alpha_i}^T p^mm and one less) and whether alpha is locally optimal,
 *   - the gradient-descent path of L(p) = (1/n) sum_i loss(g_i) (gdPath: plain or normalised
 *     steps, as attnlib.train),
 * and draws them with plotly.js (loaded from the site, offline; plotly only draws, the drag is
 * the few pointer handlers below). window.attnTokenDrag is the API the browser test uses.
 *
 * Phone first: the plots let a vertical swipe scroll the page (touch-action: pan-y); only the
 * token handles, transparent buttons laid over each token and over p(0), take the pointer
 * (touch-action: none) and are at least 24 px (40 px on a touch screen). A handle is
 * focusable and the arrow keys move its token (Shift: ten times further). Pointer moves are
 * drawn at most once per animation frame (requestAnimationFrame).
 */
(function () {
  "use strict";
  if (window.attnTokenDrag) return;

  // ---------------------------------------------------------------- the math (book notation)
  const dot = (a, b) => a[0] * b[0] + a[1] * b[1];
  const norm = (a) => Math.hypot(a[0], a[1]);

  function softmax(a) {
    const m = Math.max(...a);
    const e = a.map((x) => Math.exp(x - m));
    const s = e.reduce((u, v) => u + v, 0);
    return e.map((x) => x / s);
  }

  // loss derivative l'(u): logistic -1/(1+e^u), exp -e^-u, correlation -1 (attnlib.models)
  function lossDerivative(u, loss) {
    if (loss === "logistic") return -1 / (1 + Math.exp(u));
    if (loss === "exp") return -Math.exp(-u);
    if (loss === "correlation") return -1;
    throw new Error("loss: expected logistic, exp or correlation, got " + loss);
  }

  // grad L(p) = (1/n) sum_i l'(g_i) sum_t s_it (gamma_it - g_i) k_it
  function gradient(keys, gamma, p, loss) {
    const G = [0, 0];
    const n = keys.length;
    for (let i = 0; i < n; i++) {
      const s = softmax(keys[i].map((k) => dot(k, p)));
      const g = s.reduce((u, st, t) => u + st * gamma[i][t], 0);
      const d = lossDerivative(g, loss) / n;
      keys[i].forEach((k, t) => {
        const w = d * s[t] * (gamma[i][t] - g);
        G[0] += w * k[0];
        G[1] += w * k[1];
      });
    }
    return G;
  }

  // p(0), ..., p(steps): p <- p - lr G / (||G|| + eps) (normalised) or p - lr G (plain)
  function gdPath(keys, gamma, p0, o) {
    const path = [[p0[0], p0[1]]];
    let p = [p0[0], p0[1]];
    for (let k = 0; k < o.iterations; k++) {
      const G = gradient(keys, gamma, p, o.loss);
      const scale = o.normalized ? o.lr / (norm(G) + o.eps) : o.lr;
      if (!isFinite(scale)) { path.push(p); continue; }  // zero gradient, eps = 0: stopped
      p = [p[0] - scale * G[0], p[1] - scale * G[1]];
      path.push(p);
    }
    return path;
  }

  // The Att-SVM in 2-D: the minimum-norm point of {p : a_j^T p >= 1} lies on one constraint
  // (p = a_j/||a_j||^2) or at the corner of two; enumerate both kinds, keep the feasible
  // candidate of least norm. Returns {feasible, p, support (n x T bools)}.
  function attSvm2d(keys, alpha) {
    const rows = [];  // [a, i, t]
    keys.forEach((K, i) => K.forEach((k, t) => {
      if (t !== alpha[i]) {
        const ka = K[alpha[i]];
        rows.push([[ka[0] - k[0], ka[1] - k[1]], i, t]);
      }
    }));
    const scale = Math.max(1e-300, ...rows.map((r) => norm(r[0])));
    const feasible = (p) => rows.every((r) => dot(r[0], p) >= 1 - 1e-9);
    let best = null;
    const consider = (p) => {
      if (p.every(isFinite) && feasible(p) && (best === null || norm(p) < norm(best))) best = p;
    };
    rows.forEach(([a]) => {
      const q = dot(a, a);
      if (q > 1e-24 * scale * scale) consider([a[0] / q, a[1] / q]);
    });
    for (let j = 0; j < rows.length; j++) {
      for (let l = j + 1; l < rows.length; l++) {
        const a = rows[j][0], b = rows[l][0];
        const det = a[0] * b[1] - a[1] * b[0];
        if (Math.abs(det) <= 1e-12 * scale * scale) continue;
        consider([(b[1] - a[1]) / det, (a[0] - b[0]) / det]);  // a.p = 1, b.p = 1
      }
    }
    const support = keys.map((K) => K.map(() => false));
    if (best === null) return { feasible: false, p: null, support: null };
    rows.forEach(([a, i, t]) => { if (Math.abs(dot(a, best) - 1) <= 1e-6) support[i][t] = true; });
    return { feasible: true, p: best, support: support };
  }

  const cosine = (a, b) => dot(a, b) / (norm(a) * norm(b));

  // everything the page shows for one state
  function compute(st) {
    const ex = st.examples[st.example];
    const svm = attSvm2d(st.keys, st.alpha);
    const path = gdPath(st.keys, ex.gamma, st.p0,
      { lr: st.lr, normalized: st.normalized, loss: st.loss, iterations: st.iterations,
        eps: ex.eps });
    const pEnd = path[path.length - 1];
    const attn = st.keys.map((K) => softmax(K.map((k) => dot(k, pEnd))));
    const reached = attn.map((s) => s.indexOf(Math.max(...s)));
    // locally optimal (chapter 3): feasible, and every support token scores below the selected
    const local = svm.feasible && svm.support.every((row, i) => row.every((s, t) =>
      !s || ex.gamma[i][t] < ex.gamma[i][st.alpha[i]] - 1e-10));
    // infeasible: which inputs are infeasible on their own (the others only jointly)
    const alone = svm.feasible ? null
      : st.keys.map((K, i) => attSvm2d([K], [st.alpha[i]]).feasible);
    return {
      feasible: svm.feasible, p_mm: svm.p, support: svm.support, path: path, p_end: pEnd,
      locally_optimal: local, feasible_alone: alone,
      attention: attn, reached: reached,
      cos: svm.feasible && norm(pEnd) > 0 ? cosine(pEnd, svm.p) : null,
    };
  }

  // ---------------------------------------------------------------- the page
  const CSS = `
.attnlib-drag{margin:.6em 0 1.2em 0;font-size:.95rem}
.attnlib-drag .ad-controls{display:flex;flex-wrap:wrap;gap:.35em 1.4em;margin:.3em 0 .5em 0}
.attnlib-drag .ad-control{display:flex;flex-wrap:wrap;align-items:center;gap:.3em}
.attnlib-drag .ad-name{font-weight:600}
.attnlib-drag button{font:inherit;padding:.1em .55em;margin:0;border:1px solid #999;
 border-radius:4px;background:#fff;color:#333;cursor:pointer}
.attnlib-drag button[aria-pressed=true]{background:#1f77b4;color:#fff;border-color:#1f77b4}
.attnlib-drag select{font:inherit}
.attnlib-drag .ad-pick{display:inline-flex;align-items:center;gap:.2em;white-space:nowrap}
.attnlib-drag input[type=range]{width:11em;max-width:55vw}
.attnlib-drag .ad-value{font-weight:700;color:#d62728;min-width:2.5em}
.attnlib-drag .ad-figs{display:flex;flex-wrap:wrap;gap:.4em;width:100%}
.attnlib-drag .ad-box{position:relative;flex:1 1 300px;min-width:260px;height:440px}
.attnlib-drag .ad-plot{width:100%;height:100%;touch-action:pan-y pinch-zoom}
.attnlib-drag .ad-handles{position:absolute;left:0;top:0;width:0;height:0}
.attnlib-drag .ad-handle{position:absolute;width:28px;height:28px;margin:-14px 0 0 -14px;
 padding:0;border:0;border-radius:50%;background:transparent;cursor:grab;touch-action:none;
 -webkit-tap-highlight-color:transparent;z-index:2}
.attnlib-drag .ad-handle:focus{outline:none}
.attnlib-drag .ad-handle:focus-visible,.attnlib-drag .ad-handle[data-active=true]{
 box-shadow:0 0 0 3px #1f77b4;background:rgba(31,119,180,.12)}
.attnlib-drag .ad-handle[data-active=true]{cursor:grabbing}
@media (pointer:coarse){.attnlib-drag .ad-handle{width:40px;height:40px;margin:-20px 0 0 -20px}}
.attnlib-drag .ad-readout{margin:.4em 0 0 0;line-height:1.5}
.attnlib-drag .ad-readout b{color:#d62728}
.attnlib-drag .ad-hint{margin:.2em 0;color:#555}`;

  const fmt = (x, d = 3) => (x === null || x === undefined ? "—" : Number(x).toFixed(d))
    .replace(/^-/, "\u2212");
  const pair = (p, d = 3) => (p ? `(${fmt(p[0], d)}, ${fmt(p[1], d)})` : "—");
  const clone = (x) => JSON.parse(JSON.stringify(x));
  // per input: the marker symbol of its tokens and the dash of its margin lines
  const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "pentagon"];
  const DASHES = ["dot", "dashdot", "longdash", "longdashdot", "5px,2px,1px,2px"];
  const tokenName = (n, i, t) => (n === 1 ? `x${t + 1}` : `x<sub>${i + 1},${t + 1}</sub>`);

  function loadPlotly(src) {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (!loadPlotly.promise) {
      loadPlotly.promise = new Promise((resolve, reject) => {
        // plotly's bundle registers itself as an AMD module when RequireJS is on the page
        // (saved widgets load it): hide `define` while it runs, so it sets window.Plotly
        const define = window.define;
        window.define = undefined;
        const s = document.createElement("script");
        s.src = src;
        s.onload = () => { window.define = define; resolve(window.Plotly); };
        s.onerror = () => { window.define = define; reject(new Error("cannot load " + src)); };
        document.head.appendChild(s);
      });
    }
    return loadPlotly.promise;
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => e.setAttribute(k, v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  class Explorer {
    constructor(root, data) {
      this.root = root;
      this.data = data;
      this.col = data.palette.roles;
      this.renders = 0;
      this.pathRange = null;
      this.state = this.initial(data.defaults.example);
      this.build();
    }

    initial(example) {
      const d = this.data, ex = d.examples[example];
      return { examples: d.examples, example: example, keys: clone(ex.keys),
        alpha: ex.optimal.slice(), p0: ex.p0.slice(), lr: d.defaults.lr,
        normalized: d.defaults.normalized, loss: d.defaults.loss,
        iterations: d.defaults.iterations, moved: null };
    }

    // change the state (the API the controls and the browser test use) and redraw
    set(patch) {
      if (patch.example && patch.example !== this.state.example) {
        const keep = ["lr", "normalized", "loss", "iterations"].reduce(
          (o, k) => Object.assign(o, { [k]: this.state[k] }), {});
        this.state = Object.assign(this.initial(patch.example), keep);
        this.pathRange = null;
      }
      Object.entries(patch).forEach(([k, v]) => {
        if (k !== "example") this.state[k] = clone(v);
      });
      if (!this.dragging) this.pathRange = null;  // the view of p follows the path, not a drag
      this.syncControls();
      this.render();
    }

    moveToken(i, t, x, y) { this.set({ keys: this.withKey(i, t, [x, y]), moved: [i, t] }); }
    moveStart(x, y) { this.set({ p0: [x, y] }); }
    withKey(i, t, k) { const K = clone(this.state.keys); K[i][t] = k; return K; }
    numbers() { return clone(Object.assign({}, this.result, { path: undefined })); }

    build() {
      const r = this.root;
      r.textContent = "";
      const style = el("style");
      style.textContent = CSS;
      r.appendChild(style);
      r.appendChild(el("p", { class: "ad-hint" },
        "Drag a token in the token plane, or the green start p(0) of gradient descent in " +
        "the plane of p (or focus one with Tab and move it with the arrow keys)."));
      this.controls = el("div", { class: "ad-controls" });
      r.appendChild(this.controls);
      const figs = el("div", { class: "ad-figs" });
      this.keysDiv = el("div", { class: "ad-plot", "data-plot": "keys" });
      this.pathDiv = el("div", { class: "ad-plot", "data-plot": "path" });
      this.handles = { keys: el("div", { class: "ad-handles" }),
        path: el("div", { class: "ad-handles" }) };
      [[this.keysDiv, this.handles.keys], [this.pathDiv, this.handles.path]].forEach(([d, h]) => {
        const box = el("div", { class: "ad-box" });
        box.append(d, h);
        figs.appendChild(box);
      });
      r.appendChild(figs);
      this.readout = el("div", { class: "ad-readout", "aria-live": "polite" });
      r.appendChild(this.readout);
      this.buildControls();
      this.frames = [];  // the times of the drawings made while a drag is on (frame rate)
      this.drawMs = [];  // how long each drawing took, in milliseconds
    }

    buttons(name, label, values, show) {
      const box = el("div", { class: "ad-control", "data-control": name });
      box.appendChild(el("span", { class: "ad-name" }, label));
      values.forEach((v) => {
        const b = el("button", { type: "button", "data-value": JSON.stringify(v) }, show(v));
        b.addEventListener("click", () => this.set({ [name]: v }));
        box.appendChild(b);
      });
      this.controls.appendChild(box);
    }

    buildControls() {
      const d = this.data;
      this.buttons("example", "example", Object.keys(d.examples), (v) => v);
      this.selBox = el("div", { class: "ad-control", "data-control": "alpha" });
      const name = el("span", { class: "ad-name" });
      name.innerHTML = "p<sup>mm</sup> selects";
      this.selBox.appendChild(name);
      this.selects = [];  // one per input, built by syncControls for the example's shape
      this.controls.appendChild(this.selBox);
      this.buttons("lr", "step size", d.choices.lr, (v) => String(v));
      this.buttons("normalized", "normalised", [true, false], (v) => (v ? "yes" : "no"));
      this.buttons("loss", "loss", d.choices.loss, (v) => v);
      const it = el("div", { class: "ad-control", "data-control": "iterations" });
      it.appendChild(el("span", { class: "ad-name" }, "iterations"));
      this.range = el("input", { type: "range", min: d.choices.iterations[0],
        max: d.choices.iterations[1], step: 10, "aria-label": "iterations" });
      this.range.addEventListener("input", () => this.set({ iterations: Number(this.range.value) }));
      this.itValue = el("span", { class: "ad-value" });
      it.append(this.range, this.itValue);
      this.controls.appendChild(it);
      const reset = el("button", { type: "button", "data-control": "reset" }, "reset");
      reset.addEventListener("click", () => {
        const keep = this.state;
        this.state = this.initial(keep.example);
        this.pathRange = null;
        this.syncControls();
        this.render();
      });
      this.controls.appendChild(reset);
    }

    syncControls() {
      const st = this.state;
      this.controls.querySelectorAll("button[data-value]").forEach((b) => {
        const name = b.parentNode.getAttribute("data-control");
        b.setAttribute("aria-pressed", String(JSON.stringify(st[name]) === b.dataset.value));
      });
      const n = st.keys.length, opt = st.examples[st.example].optimal;
      const shape = `${st.example}:${n}x${st.keys[0].length}`;
      if (this.selShape !== shape) {  // a select per input: "input i" x1 ... xT (optimal)
        this.selShape = shape;
        this.selects.forEach((s) => s.parentNode.remove());
        this.selects = st.keys.map((K, i) => {
          const pick = el("label", { class: "ad-pick" });
          if (n > 1) pick.appendChild(el("span", {}, `input ${i + 1}`));
          const s = el("select", { "data-input": String(i), "aria-label": n === 1
            ? "token selected by p^mm" : `token of input ${i + 1} selected by p^mm` });
          K.forEach((_, t) => s.appendChild(el("option", { value: String(t) },
            `x${t + 1}` + (t === opt[i] ? " (optimal)" : ""))));
          s.addEventListener("change", () => {
            const alpha = this.state.alpha.slice();
            alpha[i] = Number(s.value);
            this.set({ alpha: alpha });
          });
          pick.appendChild(s);
          this.selBox.appendChild(pick);
          return s;
        });
      }
      this.selects.forEach((s, i) => { s.value = String(st.alpha[i]); });
      this.range.value = st.iterations;
      this.itValue.textContent = String(st.iterations);
    }

    // the stretch [lo, hi] of the line c + s w inside the view [-R, R]^2 (null: it misses)
    inView(c, w, R) {
      let lo = -Infinity, hi = Infinity;
      for (let j = 0; j < 2; j++) {
        if (Math.abs(w[j]) < 1e-12) {
          if (Math.abs(c[j]) > R) return null;
          continue;
        }
        const a = (-R - c[j]) / w[j], b = (R - c[j]) / w[j];
        lo = Math.max(lo, Math.min(a, b));
        hi = Math.min(hi, Math.max(a, b));
      }
      return lo <= hi ? [lo, hi] : null;
    }

    keyRange(ex) {
      const m = Math.max(...ex.keys.flat().map((k) => Math.max(Math.abs(k[0]), Math.abs(k[1]))));
      return Math.max(1.5, Math.ceil(13 * m) / 10);
    }

    // pixel -> data coordinates of a plotly plot (its axes' offsets, lengths and ranges)
    toData(div, ev) {
      const fl = div._fullLayout, xa = fl.xaxis, ya = fl.yaxis;
      const box = div.getBoundingClientRect();
      const px = ev.clientX - box.left, py = ev.clientY - box.top;
      return [xa.range[0] + (px - xa._offset) / xa._length * (xa.range[1] - xa.range[0]),
        ya.range[1] - (py - ya._offset) / ya._length * (ya.range[1] - ya.range[0])];
    }

    toPixel(div, p) {
      const fl = div._fullLayout, xa = fl.xaxis, ya = fl.yaxis;
      return [xa._offset + (p[0] - xa.range[0]) / (xa.range[1] - xa.range[0]) * xa._length,
        ya._offset + (ya.range[1] - p[1]) / (ya.range[1] - ya.range[0]) * ya._length];
    }

    // the handles: a transparent button over every token (key plane) and over p(0)
    targets() {
      const out = [];
      this.state.keys.forEach((K, i) => K.forEach((k, t) => out.push(
        { div: this.keysDiv, layer: this.handles.keys, id: `${i},${t}`, target: [i, t], at: k })));
      out.push({ div: this.pathDiv, layer: this.handles.path, id: "p0", target: "p0",
        at: this.state.p0 });
      return out;
    }

    label(target) {
      const st = this.state, n = st.keys.length;
      if (target === "p0") {
        return `start p(0) of gradient descent at ${pair(st.p0, 2)}; arrow keys move it`;
      }
      const [i, t] = target, g = st.examples[st.example].gamma[i][t];
      const name = n === 1 ? `x${t + 1}` : `x${i + 1},${t + 1}`;
      return `token ${name} at ${pair(st.keys[i][t], 2)}, score γ = ${fmt(g, 2)}; ` +
        "arrow keys move it";
    }

    placeHandles() {
      const all = this.targets();
      const shape = all.map((h) => h.id).join(" ");
      if (this.handleShape !== shape) {  // rebuilt only when the tokens change (keeps focus)
        this.handleShape = shape;
        this.handleEls = {};
        Object.values(this.handles).forEach((layer) => { layer.textContent = ""; });
        all.forEach((h) => {
          const b = el("button", { type: "button", class: "ad-handle", "data-handle": h.id,
            "aria-roledescription": "draggable point" });
          h.layer.appendChild(b);
          this.handleEls[h.id] = b;
          this.handleEvents(b, h.div, h.target);
        });
      }
      all.forEach((h) => {
        const b = this.handleEls[h.id];
        if (!h.div._fullLayout) return;
        const [x, y] = this.toPixel(h.div, h.at);
        b.style.left = `${x}px`;
        b.style.top = `${y}px`;
        if (!this.dragging) b.setAttribute("aria-label", this.label(h.target));  // on the drop
      });
    }

    // the target nearest to the pointer among those of the plot (handles may overlap when two
    // tokens are close: the finger takes the token it is nearest to)
    nearest(div, ev, fallback) {
      if (fallback === "p0") return "p0";
      const box = div.getBoundingClientRect();
      const at = [ev.clientX - box.left, ev.clientY - box.top];
      let best = Infinity, target = fallback;
      this.state.keys.forEach((K, i) => K.forEach((k, t) => {
        const d = Math.hypot(...this.toPixel(div, k).map((c, j) => c - at[j]));
        if (d < best) { best = d; target = [i, t]; }
      }));
      return target;
    }

    move(target, p) {
      if (target === "p0") this.moveStart(p[0], p[1]);
      else this.moveToken(target[0], target[1], p[0], p[1]);
    }

    // draw the latest pointer position once per animation frame
    schedule() {
      if (this.frame) return;
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        this.flush();
      });
    }

    flush() {
      const d = this.dragging;
      if (!d || !d.pending) return;
      const p = d.pending;
      d.pending = null;
      this.move(d.target, p);
      this.frames.push(performance.now());
      if (this.frames.length > 600) this.frames.splice(0, 300);
    }

    handleEvents(b, div, own) {
      b.addEventListener("pointerdown", (ev) => {
        if (!div._fullLayout || (ev.pointerType === "mouse" && ev.button !== 0)) return;
        ev.preventDefault();
        b.focus({ preventScroll: true });
        try { b.setPointerCapture(ev.pointerId); } catch (e) { /* a synthetic pointer */ }
        this.dragging = { div: div, target: this.nearest(div, ev, own), pending: null, el: b };
        b.setAttribute("data-active", "true");
      });
      b.addEventListener("pointermove", (ev) => {
        const d = this.dragging;
        if (!d || d.el !== b) return;
        ev.preventDefault();
        const fl = div._fullLayout;
        const clamp = (v, r) => Math.min(Math.max(v, Math.min(...r)), Math.max(...r));
        d.pending = this.toData(div, ev).map((v, j) => clamp(v, fl[j ? "yaxis" : "xaxis"].range));
        this.schedule();
      });
      const end = () => {
        const d = this.dragging;
        if (!d || d.el !== b) return;
        this.flush();  // the last position, drawn now
        b.removeAttribute("data-active");
        this.dragging = null;
        this.pathRange = null;  // dropped: fit the view of p to the new path
        this.render();
      };
      b.addEventListener("pointerup", end);
      b.addEventListener("pointercancel", end);
      b.addEventListener("lostpointercapture", end);
      b.addEventListener("keydown", (ev) => {
        const dir = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, 1],
          ArrowDown: [0, -1] }[ev.key];
        if (!dir || !div._fullLayout) return;
        ev.preventDefault();  // the arrows move the point, not the page
        const xr = div._fullLayout.xaxis.range, yr = div._fullLayout.yaxis.range;
        const step = (xr[1] - xr[0]) / 60 * (ev.shiftKey ? 10 : 1);
        const at = own === "p0" ? this.state.p0 : this.state.keys[own[0]][own[1]];
        const clamp = (v, r) => Math.min(Math.max(v, Math.min(...r)), Math.max(...r));
        this.move(own, [clamp(at[0] + dir[0] * step, xr), clamp(at[1] + dir[1] * step, yr)]);
      });
    }

    render() {
      const t0 = performance.now();
      this.draw();
      this.drawMs.push(performance.now() - t0);  // what one frame costs (the frame rate)
      if (this.drawMs.length > 600) this.drawMs.splice(0, 300);
    }

    draw() {
      const st = this.state, res = compute(st);
      this.result = res;
      this.renders += 1;
      const n = st.keys.length, ex = st.examples[st.example], col = this.col;
      const font = { family: "system-ui, sans-serif", size: 13, color: "#333" };
      const axis = (title, range) => ({ title: { text: title, standoff: 4 }, range: range,
        zeroline: true, zerolinecolor: col.axis, gridcolor: "#eee", constrain: "domain" });
      const flat = [];
      st.keys.forEach((K, i) => K.forEach((k, t) => flat.push({ k: k, i: i, t: t })));
      const line = (pts, name, color, dash, extra) => Object.assign({ type: "scatter",
        mode: "lines", x: pts.map((q) => q[0]), y: pts.map((q) => q[1]), name: name,
        line: { color: color, width: 2.5, dash: dash || "solid" } }, extra || {});
      const ring = (items, name, color, size) => ({ type: "scatter", mode: "markers", name: name,
        x: items.map((o) => o.k[0]), y: items.map((o) => o.k[1]),
        marker: { symbol: "circle-open", size: size, color: color, line: { width: 2.5 } } });
      // --- left: the key plane
      const R = this.keyRange(ex);  // the key plane's view: [-R, R]^2, fixed per example
      const keyTraces = [];
      const unit = (p) => [p[0] / norm(p), p[1] / norm(p)];
      if (res.feasible) {
        const u = unit(res.p_mm);
        keyTraces.push(line([[0, 0], [3 * R * u[0], 3 * R * u[1]]],
          "p<sup>mm</sup> direction", col.target));
        // each input's margin: its selected token's level line k.p^mm = k_{i alpha_i}.p^mm
        // and the support level 1/||p^mm|| behind it (k.p^mm one less), dashed per input and
        // tagged with the input's marker symbol where the line leaves the view
        const w = [-u[1], u[0]], back = 1 / norm(res.p_mm);
        st.keys.forEach((K, i) => {
          const ka = K[st.alpha[i]], dash = DASHES[i % DASHES.length];
          [["selected", ka], ["support", [ka[0] - back * u[0], ka[1] - back * u[1]]]].forEach(
            ([level, c], j) => {
              const pts = [[c[0] - 3 * R * w[0], c[1] - 3 * R * w[1]],
                [c[0] + 3 * R * w[0], c[1] + 3 * R * w[1]]];
              keyTraces.push(line(pts, "margin", col.ink, dash, { showlegend: i === 0 && j === 0,
                legendgroup: "margin", line: { color: col.ink, width: 1.2, dash: dash },
                meta: { margin: i, level: level, value: dot(ka, res.p_mm) - j } }));
              // the input's symbol just inside the view: the selected level's at one end,
              // the support level's at the other (several inputs)
              const seen = this.inView(c, w, R);
              const s = seen && (j === 0 ? 0.95 * seen[1] + 0.05 * seen[0]
                : 0.95 * seen[0] + 0.05 * seen[1]);
              if (seen !== null && n > 1) {
                keyTraces.push({ type: "scatter", mode: "markers", showlegend: false,
                  legendgroup: "margin", x: [c[0] + s * w[0]], y: [c[1] + s * w[1]],
                  meta: { tag: i, level: level },
                  marker: { symbol: SYMBOLS[i % SYMBOLS.length] + "-open", size: 9,
                    color: col.ink, line: { width: 1.5 } } });
              }
            });
        });
      }
      if (norm(res.p_end) > 0) {
        const u = unit(res.p_end);
        keyTraces.push(line([[0, 0], [3 * R * u[0], 3 * R * u[1]]],
          `p(${st.iterations}) direction`, col.other, "dash"));
      }
      for (let i = 0; i < n; i++) {
        const mine = flat.filter((o) => o.i === i);
        keyTraces.push({ type: "scatter", mode: "markers+text", name: n === 1 ? "tokens"
          : `input ${i + 1}`, x: mine.map((o) => o.k[0]), y: mine.map((o) => o.k[1]),
        // one input: every token named; several: the selected and support tokens (i,t)
        text: mine.map((o) => (n === 1 ? `x${o.t + 1}`
          : (o.t === st.alpha[o.i] || (res.feasible && res.support[o.i][o.t]))
            ? `${o.i + 1},${o.t + 1}` : "")),
        textposition: "top right", textfont: { size: 13 },
        marker: { size: 13, symbol: SYMBOLS[i % SYMBOLS.length],
          color: mine.map((o) => ex.gamma[o.i][o.t]), colorscale: "Viridis",
          cmin: Math.min(...ex.gamma.flat()), cmax: Math.max(...ex.gamma.flat()),
          line: { color: col.ink, width: 1 } } });
      }
      keyTraces.push(ring(flat.filter((o) => o.t === st.alpha[o.i]), "selected", col.ink, 22));
      if (res.feasible) {
        keyTraces.push(ring(flat.filter((o) => res.support[o.i][o.t]), "support tokens",
          col.support, 27));
      }
      const legend = { orientation: "h", x: 0, y: -0.2, yanchor: "top", font: { size: 12 } };
      const keyLayout = { font: font, margin: { l: 44, r: 8, t: 30, b: 10 },
        title: { text: "tokens k<sub>it</sub> (drag them)", font: { size: 14 } },
        xaxis: axis("", [-R, R]), yaxis: Object.assign(axis("", [-R, R]),
          { scaleanchor: "x", scaleratio: 1 }), legend: legend, showlegend: true,
        dragmode: false, hovermode: false };
      // --- right: the path of p
      const pts = res.path.concat([[0, 0], st.p0]);
      if (!this.pathRange) {
        let m = Math.max(1.5, ...pts.map((q) => Math.max(Math.abs(q[0]), Math.abs(q[1]))));
        m *= 1.1;
        this.pathRange = [-m, m];
      }
      const P = this.pathRange[1];
      const pathTraces = [];
      if (res.feasible) {
        const u = unit(res.p_mm);
        pathTraces.push(line([[0, 0], [3 * P * u[0], 3 * P * u[1]]],
          "p<sup>mm</sup> direction", col.target));
      }
      pathTraces.push(Object.assign(line(res.path, `GD path p(k), k ≤ ${st.iterations}`,
        col.path), { mode: "lines" }));
      pathTraces.push({ type: "scatter", mode: "markers+text", name: "p(0): drag it",
        x: [st.p0[0]], y: [st.p0[1]], text: ["p(0)"], textposition: "top right",
        marker: { size: 16, color: col.third, line: { color: col.ink, width: 1 } } });
      pathTraces.push({ type: "scatter", mode: "markers", name: `p(${st.iterations})`,
        x: [res.p_end[0]], y: [res.p_end[1]],
        marker: { size: 11, symbol: "diamond", color: col.other } });
      const pathLayout = { font: font, margin: { l: 44, r: 8, t: 30, b: 10 },
        title: { text: "prompt p: gradient descent", font: { size: 14 } },
        xaxis: axis("", this.pathRange.slice()), yaxis: Object.assign(
          axis("", this.pathRange.slice()), { scaleanchor: "x", scaleratio: 1 }),
        legend: legend, showlegend: true, dragmode: false, hovermode: false };
      const cfg = { staticPlot: true, responsive: true, displayModeBar: false };
      window.Plotly.react(this.keysDiv, keyTraces, keyLayout, cfg);
      window.Plotly.react(this.pathDiv, pathTraces, pathLayout, cfg);
      if (!this.hooked && this.keysDiv.on) {  // plotly redrew (a resize): the handles follow
        this.hooked = true;
        [this.keysDiv, this.pathDiv].forEach((d) => d.on("plotly_afterplot",
          () => this.placeHandles()));
      }
      this.placeHandles();
      this.writeReadout(res);
    }

    // chapter 3: a feasible selection is locally optimal when every support token scores
    // below the selected token of its input; otherwise name the first that does not
    localText(res, names) {
      const st = this.state, n = st.keys.length, g = st.examples[st.example].gamma;
      if (res.locally_optimal) {
        return "locally optimal (every support token scores below the selected one): " +
          "<b>yes</b>.";
      }
      let why = "";
      res.support.some((row, i) => row.some((s, t) => {
        if (!s || g[i][t] < g[i][st.alpha[i]] - 1e-10) return false;
        why = ` (support token ${tokenName(n, i, t)} scores γ = ${fmt(g[i][t], 2)}, not ` +
          `below the selected ${names[i]}'s ${fmt(g[i][st.alpha[i]], 2)})`;
        return true;
      }));
      return `locally optimal: <b>no</b>${why}.`;
    }

    writeReadout(res) {
      const st = this.state, n = st.keys.length, ex = st.examples[st.example];
      const optimal = st.alpha.every((a, i) => a === ex.optimal[i]);
      const names = st.alpha.map((a, i) => tokenName(n, i, a));
      const sel = n === 1 ? names[0] : optimal ? "the optimal tokens" : names.join(", ");
      const lines = [];
      if (n === 1) {
        lines.push("Tokens: " + st.keys[0].map((k, t) =>
          `x${t + 1} = ${pair(k, 2)} (γ = ${fmt(ex.gamma[0][t], 2)})`).join(", ") + ".");
      } else if (st.moved) {
        const [i, t] = st.moved;
        lines.push(`Moved: x<sub>${i + 1},${t + 1}</sub> = ${pair(st.keys[i][t], 2)} ` +
          `(γ = ${fmt(ex.gamma[i][t], 2)}).`);
      }
      if (res.feasible) {
        const sup = [];
        res.support.forEach((row, i) => row.forEach((s, t) => {
          if (s) sup.push(tokenName(n, i, t));
        }));
        lines.push(`p<sup>mm</sup> (selecting ${sel}) = <b>${pair(res.p_mm)}</b>, ` +
          `‖p<sup>mm</sup>‖ = <b>${fmt(norm(res.p_mm))}</b>, margin ` +
          `1/‖p<sup>mm</sup>‖ = ${fmt(1 / norm(res.p_mm))}; support tokens: ` +
          `<b>${sup.join(", ") || "none"}</b>; ` + this.localText(res, names));
      } else {
        const alone = res.feasible_alone.map((f, i) => (f ? null : names[i])).filter((x) => x);
        lines.push(`p<sup>mm</sup>: <b>infeasible</b>: ` + (n === 1 || alone.length
          ? `no direction p puts ${alone.length ? alone.join(", ") : sel} ahead of every ` +
            "other token of its input."
          : `each selected token (${sel}) can be put ahead of the other tokens of its input, ` +
            "but no single direction p does it for every input at once.") +
          " Locally optimal: <b>no</b>.");
      }
      const reached = res.reached.map((t, i) => tokenName(n, i, t)).join(", ");
      const top = Math.min(...res.attention.map((s) => Math.max(...s)));
      lines.push(`After ${st.iterations} steps: p(${st.iterations}) = <b>${pair(res.p_end)}</b>, ` +
        `‖p‖ = <b>${fmt(norm(res.p_end))}</b>, cos(p, p<sup>mm</sup>) = ` +
        `<b>${res.cos === null ? "—" : fmt(res.cos, 4)}</b>; the largest attention ` +
        `goes to ${reached} (smallest top probability ${fmt(top, 3)}).`);
      this.readout.innerHTML = lines.map((s) => `<div>${s}</div>`).join("");
    }
  }

  const instances = {};
  function mount(uid) {
    const root = document.getElementById(uid);
    const src = root && root.getAttribute("data-plotly-src");
    const holder = document.getElementById(uid + "-data");
    if (!root || !holder) return;
    const data = JSON.parse(holder.textContent);
    const note = root.innerHTML;
    loadPlotly(src).then(() => {
      const ex = new Explorer(root, data);
      instances[uid] = ex;
      ex.syncControls();
      ex.render();
      root.setAttribute("data-ready", "true");
    }).catch(() => { root.innerHTML = note; });
  }

  window.attnTokenDrag = { mount, instances, attSvm2d, gdPath, gradient, softmax, compute };
})();
