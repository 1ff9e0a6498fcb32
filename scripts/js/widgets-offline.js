/* Loaded before @jupyter-widgets/html-manager's embed-amd.js on pages with saved widgets
 * (nb_ipywidgets_js in _config.yml), so that those widgets render with no network:
 * 1. the embed manager loads its icon fonts from this folder (not from the page's folder);
 * 2. it typesets widget labels with MathJax 2's MathJax.Hub.Queue, which MathJax 3 lacks:
 *    map that call onto MathJax 3's typesetPromise. */
(function () {
  "use strict";
  var here = document.currentScript && document.currentScript.src;
  if (here) {
    var folder = new URL("./", here).href;  // this folder: embed-amd.js and its fonts
    window.__jupyter_widgets_assets_path__ = folder;
    // The bundle locates its fonts from the AMD module URI of ".../html-manager/dist/...".
    // Both of its bundles do this, from two module names: map both into this folder.
    var paths = {
      "@jupyter-widgets/html-manager": folder + "html-manager",
      "@jupyter-widgets/html-manager/dist": folder.replace(/\/$/, "")
    };
    if (typeof window.require === "function" && window.require.config) {
      window.require.config({paths: paths});
    } else {  // RequireJS, loaded next, reads a global `require` object as its configuration
      window.require = window.require || {};
      window.require.paths = Object.assign(paths, window.require.paths || {});
    }
  }
  function addHub() {
    var mj = window.MathJax;
    if (!mj || mj.Hub) return;
    mj.Hub = {
      Queue: function (job) {
        var el = job && job[2];
        var ready = mj.startup && mj.startup.promise ? mj.startup.promise : Promise.resolve();
        ready.then(function () {
          if (window.MathJax.typesetPromise) return window.MathJax.typesetPromise(el ? [el] : undefined);
        }).catch(function () {});
      }
    };
  }
  // MathJax 3 (a deferred script) has replaced its configuration object by then.
  document.addEventListener("DOMContentLoaded", addHub);
})();
