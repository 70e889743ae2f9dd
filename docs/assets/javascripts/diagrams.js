// Render the site's Mermaid diagrams offline.
//
// The machine pages hold `<div class="mermaid">` blocks (pymdownx.superfences custom fence,
// generated from spec/machines/). This script loads the vendored Mermaid
// (mermaid-11.17.2.min.js, next to this file, MIT licensed) only on pages that have such a
// block, and renders each diagram as an inline SVG inside its block. Nothing is fetched from
// a CDN, so the site works from file:// and without network.
(function () {
  "use strict";
  var here = document.currentScript && document.currentScript.src;
  var base = here ? here.slice(0, here.lastIndexOf("/") + 1) : "assets/javascripts/";

  function render() {
    var blocks = document.querySelectorAll("div.mermaid:not([data-processed])");
    if (!blocks.length) return;
    var run = function () {
      window.mermaid.initialize({
        startOnLoad: false,
        securityLevel: "strict",
        theme: "neutral",
        state: { useMaxWidth: true }
      });
      window.mermaid.run({ nodes: blocks }).catch(function (error) {
        console.error("mermaid:", error);
      });
    };
    if (window.mermaid && window.mermaid.run) return run();
    var script = document.createElement("script");
    script.src = base + "mermaid-11.17.2.min.js";
    script.onload = run;
    document.head.appendChild(script);
  }

  // Material's instant navigation replaces the page without a reload: follow it when present.
  if (window.document$ && window.document$.subscribe) {
    window.document$.subscribe(render);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
