// The safety matrix (results page): mark whether it fits the page or scrolls sideways.
//
// The table is generated at build time (docs/hooks/jfdocs/safety_matrix.py); this only sets
// `data-overflow` on its wrapper to "none" or "scroll" (and again when the window is
// resized), so the stylesheet can show a shadow on the edge of a matrix that scrolls.
(function () {
  "use strict";

  function mark() {
    var wraps = document.querySelectorAll(".jf-matrix-wrap");
    for (var i = 0; i < wraps.length; i++) {
      var wrap = wraps[i];
      wrap.setAttribute(
        "data-overflow",
        wrap.scrollWidth > wrap.clientWidth + 1 ? "scroll" : "none"
      );
      wrap.setAttribute("data-width", String(wrap.scrollWidth));
    }
  }

  window.addEventListener("resize", mark);
  // Material's instant navigation replaces the page without a reload: follow it when present.
  if (window.document$ && window.document$.subscribe) {
    window.document$.subscribe(mark);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", mark);
  } else {
    mark();
  }
})();
