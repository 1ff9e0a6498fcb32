/* The book's search page (loaded on search.html only, by book/_ext/book_site.py).
 *
 * Sphinx's searchtools.js builds each result's snippet from the page's HTML source, where
 * math is still TeX ("\(p\)", "\mathbf{x}") because MathJax typesets it in the browser; and it
 * finds a result's anchor with querySelector('[role="main"] #id'), which throws on ids that are
 * no CSS identifier (sphinx-exercise's "book/02_att_svm-solution-5": a console error for the
 * search "exercise 2.1").  Here the snippet text has math as plain text and anchors are
 * looked up by id.
 */
(() => {
  "use strict";
  if (typeof Search === "undefined") return;

  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε",
    zeta: "ζ", eta: "η", theta: "θ", vartheta: "ϑ", iota: "ι", kappa: "κ", lambda: "λ",
    mu: "μ", nu: "ν", xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", upsilon: "υ",
    phi: "φ", varphi: "φ", chi: "χ", psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ",
    Theta: "Θ", Lambda: "Λ", Xi: "Ξ", Pi: "Π", Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω",
    top: "⊤", intercal: "⊤", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠",
    in: "∈", notin: "∉", to: "→", rightarrow: "→", Rightarrow: "⇒", leftarrow: "←",
    mapsto: "↦", cdot: "·", cdots: "⋯", ldots: "…", dots: "…", times: "×", sum: "Σ",
    prod: "Π", infty: "∞", star: "⋆", ast: "∗", approx: "≈", sim: "∼", propto: "∝",
    nabla: "∇", partial: "∂", ell: "ℓ", mid: "|", langle: "⟨", rangle: "⟩", lVert: "‖",
    rVert: "‖", Vert: "‖", "|": "‖", pm: "±", forall: "∀", exists: "∃", subset: "⊂",
    subseteq: "⊆", cup: "∪", cap: "∩", circ: "∘", odot: "⊙", otimes: "⊗", oplus: "⊕",
    sqrt: "√", log: "log", exp: "exp", min: "min", max: "max", arg: "arg", lim: "lim",
    sup: "sup", inf: "inf", det: "det", quad: " ", qquad: " ", ",": " ", ";": " ",
    ":": " ", "!": "", left: "", right: "", big: "", Big: "", bigl: "", bigr: "",
    Bigl: "", Bigr: "", displaystyle: "", textstyle: "", nonumber: "", notag: "",
  };
  // commands whose argument is kept as it is (fonts, accents, text)
  const KEEP = /\\(?:math(?:rm|bf|it|sf|tt|cal|bb|frak)|boldsymbol|bm|text(?:rm|bf|it)?|operatorname\*?|hat|tilde|bar|vec|widehat|widetilde|overline|underline|mbox)\s*\{([^{}]*)\}/g;

  /** TeX source as readable plain text ("\mathbf{x}_{it}^\top p" -> "x_it^⊤ p"). */
  const texToText = (tex) => {
    let t = tex.replace(/^\s*(\\\(|\\\[|\$\$?)/, "").replace(/(\\\)|\\\]|\$\$?)\s*$/, "");
    t = t.replace(/\\(begin|end)\{[^{}]*\}(\{[^{}]*\})?/g, " ").replace(/\\label\{[^{}]*\}/g, "");
    for (let i = 0; i < 5; i++) {
      t = t.replace(KEEP, "$1")
           .replace(/\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)");
    }
    t = t.replace(/\\([A-Za-z]+|[|,;:!])/g, (m, name) =>
      (Object.prototype.hasOwnProperty.call(SYMBOLS, name) ? SYMBOLS[name] : name));
    t = t.replace(/\\\\/g, "; ").replace(/[{}]/g, "").replace(/&/g, " ").replace(/\\/g, "");
    return t.replace(/\s+/g, " ").trim();
  };

  /** Sphinx's htmlToText with math as text and anchors looked up by id. */
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    for (const q of [".headerlink", "script", "style", "details.attn-verified"]) {
      doc.querySelectorAll(q).forEach((el) => el.remove());
    }
    doc.querySelectorAll(".math").forEach((el) => {
      const block = el.tagName === "DIV";
      el.textContent = (block ? " " : "") + texToText(el.textContent) + (block ? " " : "");
    });
    const main = doc.querySelector('[role="main"]');
    if (anchor && main) {
      let id = anchor.replace(/^#/, "");
      try { id = decodeURIComponent(id); } catch (e) { /* keep it as it is */ }
      const el = doc.getElementById(id);
      if (el && main.contains(el)) return el.textContent;
    }
    return main ? main.textContent : "";
  };
  Search.texToText = texToText;  // (for the tests)
})();
